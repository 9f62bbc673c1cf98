#!/bin/sh
# The layer carries copies of the board files (a layer may not point outside itself).
# Exit 1 when a copy in recipes-kiosk/docent/files/ differs from its source under board/.
#   yocto/meta-docent/scripts/check-board-files.sh [PROJECT_ROOT]     (default: ../..)
# With --sync, copy board/ over the layer's files instead.
set -eu
LAYER=$(cd "$(dirname "$0")/.." && pwd)
SYNC=0
if [ "${1:-}" = "--sync" ]; then SYNC=1; shift; fi
ROOT=${1:-$LAYER/../..}
FILES=$LAYER/recipes-kiosk/docent/files
status=0
PAIRS="systemd/docent.service:docent.service
systemd/docent-firstboot.service:docent-firstboot.service
systemd/docent-tmpfiles.conf:docent-tmpfiles.conf
udev/70-docent.rules:70-docent.rules
firstboot.sh:firstboot.sh
rpi4/docent.toml:docent.toml
rpi4/asound.conf:asound.conf"
for pair in $PAIRS; do
    src=$ROOT/board/${pair%%:*}
    dst=$FILES/${pair#*:}
    if [ "$SYNC" = 1 ]; then
        cp "$src" "$dst"
    elif ! cmp -s "$src" "$dst"; then
        echo "stale: $dst differs from $src (run $0 --sync)" >&2
        status=1
    fi
done
# A file left in files/ without a source under board/ (e.g. a removed unit) is stale too.
for f in "$FILES"/*; do
    known=0
    for pair in $PAIRS; do
        [ "${pair#*:}" = "${f##*/}" ] && known=1
    done
    if [ "$known" = 0 ]; then
        echo "stale: $f has no source under board/ (delete it, or add it to $0)" >&2
        status=1
    fi
done
[ "$status" = 0 ] && [ "$SYNC" = 0 ] && echo "layer files match board/"
exit $status
