#!/bin/sh
# The layer carries copies of the board files (a layer may not point outside itself).
# Exit 1 when a copy in a recipe's files/ folder (recipes-kiosk/docent/files,
# recipes-bsp/docent-boot/files, recipes-core/rauc/files) differs from its source under board/,
# or has none, and when a file under board/systemd, board/udev or board/rauc has no copy in the
# layer.
#   yocto/meta-docent/scripts/check-board-files.sh [PROJECT_ROOT]     (default: ../..)
# With --sync, copy board/ over the layer's files instead.
set -eu
LAYER=$(cd "$(dirname "$0")/.." && pwd)
SYNC=0
if [ "${1:-}" = "--sync" ]; then SYNC=1; shift; fi
ROOT=${1:-$LAYER/../..}
DIRS="recipes-kiosk/docent/files recipes-bsp/docent-boot/files recipes-core/rauc/files"
status=0
# board/ path : layer path
PAIRS="systemd/docent.service:recipes-kiosk/docent/files/docent.service
systemd/docent-firstboot.service:recipes-kiosk/docent/files/docent-firstboot.service
systemd/docent-tmpfiles.conf:recipes-kiosk/docent/files/docent-tmpfiles.conf
systemd/docent-reboot.path:recipes-kiosk/docent/files/docent-reboot.path
systemd/docent-reboot.service:recipes-kiosk/docent/files/docent-reboot.service
systemd/docent-update-gate.service:recipes-kiosk/docent/files/docent-update-gate.service
rauc/update-gate.sh:recipes-kiosk/docent/files/update-gate.sh
udev/70-docent.rules:recipes-kiosk/docent/files/70-docent.rules
firstboot.sh:recipes-kiosk/docent/files/firstboot.sh
systemd/docent-grow-data.service:recipes-kiosk/docent/files/docent-grow-data.service
grow-data.sh:recipes-kiosk/docent/files/grow-data.sh
systemd/data-rauc.mount:recipes-kiosk/docent/files/data-rauc.mount
raspberrypi4-64/serial-getty.conf:recipes-kiosk/docent/files/serial-getty.conf
raspberrypi4-64/console-shell:recipes-kiosk/docent/files/console-shell
raspberrypi4-64/docent.toml:recipes-kiosk/docent/files/docent.toml
raspberrypi4-64/asound.conf:recipes-kiosk/docent/files/asound.conf
boot/boot.cmd:recipes-bsp/docent-boot/files/boot.cmd
boot/boot-ok.sh:recipes-bsp/docent-boot/files/boot-ok.sh
systemd/docent-boot-ok.service:recipes-bsp/docent-boot/files/docent-boot-ok.service
layout/bootstate.env:recipes-bsp/docent-boot/files/bootstate.env
layout/fw_env.config:recipes-bsp/docent-boot/files/fw_env.config
qemuarm64/bootargs:recipes-bsp/docent-boot/files/qemuarm64/bootargs
qemuarm64/rauc-system.conf:recipes-core/rauc/files/qemuarm64/system.conf
raspberrypi4-64/rauc-system.conf:recipes-core/rauc/files/raspberrypi4-64/system.conf
rauc/docent-rauc.conf:recipes-core/rauc/files/docent-rauc.conf"
# The layer's own, with no board/ source: the Pi's console under meta-raspberrypi's kernel is
# ttyS0 (its device tree's serial0 is the mini UART), while board/raspberrypi4-64/bootargs is for Debian's
# kernel (mainline device tree: the mini UART is ttyS1).
OWN="recipes-bsp/docent-boot/files/raspberrypi4-64/bootargs"
for pair in $PAIRS; do
    src=$ROOT/board/${pair%%:*}
    dst=$LAYER/${pair#*:}
    if [ "$SYNC" = 1 ]; then
        cp "$src" "$dst"
    elif ! cmp -s "$src" "$dst"; then
        echo "stale: $dst differs from $src (run $0 --sync)" >&2
        status=1
    fi
done
# A unit, rule or policy added under board/ that the layer neither copies nor names here would
# be on the simulated board and missing from the Yocto image: each is a PAIR, or listed with why
# the layer does without it.
#   systemd/docent-sysusers.conf: the docent recipe makes the user and groups (useradd class).
#   rauc/modules-load.conf: the layer's kernels have loop, squashfs and dm-verity built in
#     (meta-rauc's rauc.cfg; bitbake-values.py checks it for both machines).
BOARD_ONLY="systemd/docent-sysusers.conf rauc/modules-load.conf"
for f in $(cd "$ROOT/board" && find systemd udev rauc -type f | sort); do
    known=0
    for b in $BOARD_ONLY; do
        [ "$b" = "$f" ] && known=1
    done
    for pair in $PAIRS; do
        [ "${pair%%:*}" = "$f" ] && known=1
    done
    if [ "$known" = 0 ]; then
        echo "missing: board/$f has no copy in the layer (add it to a recipe and to PAIRS in $0, or to BOARD_ONLY with why)" >&2
        status=1
    fi
done
# A file left in files/ without a source under board/ (e.g. a removed unit) is stale too.
for f in $(cd "$LAYER" && find $DIRS -type f | sort); do
    known=0
    for own in $OWN; do
        [ "$own" = "$f" ] && known=1
    done
    for pair in $PAIRS; do
        [ "${pair#*:}" = "$f" ] && known=1
    done
    if [ "$known" = 0 ]; then
        echo "stale: $f has no source under board/ (delete it, or add it to $0)" >&2
        status=1
    fi
done
[ "$status" = 0 ] && [ "$SYNC" = 0 ] && echo "layer files match board/"
exit $status
