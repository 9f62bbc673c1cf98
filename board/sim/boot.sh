#!/usr/bin/env bash
# boot.sh [--fg] [--http PORT] [--fwd HOSTPORT:GUESTPORT ...] [--mem MB] [--fresh]
#   Boot the simulated aarch64 board by hand: QEMU virt (TCG; /dev/kvm on our hosts is a nested
#   hypervisor QEMU cannot use; acpi=off keeps the PL061 GPIO, so gpio-sim is gpiochip1 as
#   board/qemuarm64/docent.toml says) with Debian's U-Boot as its firmware (-bios), which runs the boot
#   script from the disk's boot partition. The disk is a copy of mkdisk.sh's image in
#   $RUN/disk.img, kept between boots (--fresh: a new copy, a first boot). In the background:
#     serial console  unix socket $RUN/serial.sock, everything logged to $RUN/serial.log
#     HMP monitor     unix socket $RUN/mon.sock      QMP: $RUN/qmp.sock
#     ports           127.0.0.1:HTTP -> guest :80 (busybox httpd, /run/www) + each --fwd
#   --fg: serial on this terminal instead (Ctrl-A X quits; Ctrl-A C toggles to the monitor).
#   RUN = $DOCENT_SIM_HOME/run/arm64.  Then prints how to drive the board.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
FG=0; HTTP=18090; FWD=(); MEM=768; FRESH=0
while [ $# -gt 0 ]; do
  case "$1" in
    --fg) FG=1; shift ;;
    --http) HTTP=$2; shift 2 ;;
    --fwd) FWD+=("$2"); shift 2 ;;
    --mem) MEM=$2; shift 2 ;;
    --fresh) FRESH=1; shift ;;
    *) die "unknown option $1" ;;
  esac
done
IMG=$SIM_HOME/img/arm64; RUN=$SIM_HOME/run/arm64
[ -f "$IMG/disk.img" ] || die "no image: run mkdisk.sh --docent BIN"
mkdir -p "$RUN"
if [ -f "$RUN/qemu.pid" ] && kill -0 "$(cat "$RUN/qemu.pid")" 2>/dev/null; then
  die "a board is already running (pid $(cat "$RUN/qemu.pid")); stop it: echo quit | socat - UNIX-CONNECT:$RUN/mon.sock"
fi
if [ $FRESH = 1 ] || [ ! -f "$RUN/disk.img" ]; then cp --sparse=always "$IMG/disk.img" "$RUN/disk.img"; fi
[ ${#FWD[@]} -gt 0 ] || FWD=("18091:8080")   # docent
NET="user,id=n0,restrict=on,hostfwd=tcp:127.0.0.1:$HTTP-:80"     # restrict=on: no outbound traffic
for f in "${FWD[@]}"; do NET+=",hostfwd=tcp:127.0.0.1:${f%%:*}-:${f#*:}"; done
rm -f "$RUN/mon.sock" "$RUN/qmp.sock" "$RUN/serial.sock"
CMD=(qemu-system-aarch64 -machine virt,acpi=off -cpu cortex-a72 -accel tcg,thread=multi
  -nodefaults -no-user-config -display none -m "$MEM" -smp 2
  -bios "$IMG/u-boot.bin" -drive "file=$RUN/disk.img,format=raw,if=virtio"
  -device virtio-gpu-pci -netdev "$NET" -device virtio-net-pci,netdev=n0,romfile= -device virtio-tablet-pci
  -monitor "unix:$RUN/mon.sock,server=on,wait=off" -qmp "unix:$RUN/qmp.sock,server=on,wait=off")
if [ $FG = 1 ]; then CMD+=(-serial mon:stdio)
else CMD+=(-chardev "socket,id=ser0,path=$RUN/serial.sock,server=on,wait=off,logfile=$RUN/serial.log"
           -serial chardev:ser0 -daemonize -pidfile "$RUN/qemu.pid"); fi
cat <<EOF2
board-sim: aarch64 (kernel $(cat "$IMG/KVER"), U-Boot, TCG)
  serial console : socat -,raw,echo=0,escape=0x1d UNIX-CONNECT:$RUN/serial.sock   (Ctrl-] leaves; log: $RUN/serial.log)
  HMP monitor    : socat - UNIX-CONNECT:$RUN/mon.sock          QMP: $RUN/qmp.sock
  guest httpd    : curl http://127.0.0.1:$HTTP/   (serves /run/www in the guest)$(for f in "${FWD[@]}"; do printf '\n                   127.0.0.1:%s -> guest :%s' "${f%%:*}" "${f#*:}"; done)
  in the shell   : systemctl status docent; journalctl -u docent; fw_printenv; button press|release|get
  feed the mic   : docent audio play /tmp/question.raw --device mic_feed --rate 16000
  record speaker : docent audio record /run/www/speaker.wav --device speaker_tap --seconds 10
  screendump     : echo 'screendump $RUN/screen.ppm' | socat - UNIX-CONNECT:$RUN/mon.sock
  stop           : echo quit | socat - UNIX-CONNECT:$RUN/mon.sock
EOF2
log "starting: ${CMD[*]}"
exec "${CMD[@]}"
