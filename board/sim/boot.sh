#!/usr/bin/env bash
# boot.sh ARCH [--fg] [--http PORT] [--fwd HOSTPORT:GUESTPORT ...] [--gpu virtio|bochs] [--mem MB]
#   Boot the image from mkimage.sh (a copy of data-blank.img in $RUN/data.img is the data
#   partition; it is kept between boots, delete it for a first boot) under QEMU (TCG; /dev/kvm on our hosts is a PVM nested
#   hypervisor QEMU cannot use).  Default: in the background (-daemonize), with
#     serial console  unix socket $RUN/serial.sock, everything logged to $RUN/serial.log
#     HMP monitor     unix socket $RUN/mon.sock      QMP: $RUN/qmp.sock
#     ports           127.0.0.1:HTTP -> guest :80 (busybox httpd, /www) + each --fwd
#   --fg: serial on this terminal instead (Ctrl-A X quits; Ctrl-A C toggles to the monitor).
#   RUN = $DOCENT_SIM_HOME/run/ARCH.  Then prints how to drive the board.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
A=$(norm_arch "${1:-}"); shift
FG=0; HTTP=""; FWD=(); GPU=virtio; MEM=512
while [ $# -gt 0 ]; do
  case "$1" in
    --fg) FG=1; shift ;;
    --http) HTTP=$2; shift 2 ;;
    --fwd) FWD+=("$2"); shift 2 ;;
    --gpu) GPU=$2; shift 2 ;;
    --mem) MEM=$2; shift 2 ;;
    *) die "unknown option $1" ;;
  esac
done
IMG=$SIM_HOME/img/$A; RUN=$SIM_HOME/run/$A
[ -f "$IMG/rootfs.img" ] || die "no image: run mkimage.sh $A --docent BIN"
mkdir -p "$RUN"
[ -f "$RUN/data.img" ] || cp "$IMG/data-blank.img" "$RUN/data.img"
if [ -f "$RUN/qemu.pid" ] && kill -0 "$(cat "$RUN/qemu.pid")" 2>/dev/null; then
  die "a board is already running (pid $(cat "$RUN/qemu.pid")); stop it: echo quit | socat - UNIX-CONNECT:$RUN/mon.sock"
fi
[ -n "$HTTP" ] || HTTP=$([ $A = amd64 ] && echo 18080 || echo 18090)
[ ${#FWD[@]} -gt 0 ] || FWD=("$([ $A = amd64 ] && echo 18081 || echo 18091):8080")   # docent
NET="user,id=n0,restrict=on,hostfwd=tcp:127.0.0.1:$HTTP-:80"     # restrict=on: no outbound traffic
for f in ${FWD[@]+"${FWD[@]}"}; do NET+=",hostfwd=tcp:127.0.0.1:${f%%:*}-:${f#*:}"; done
rm -f "$RUN/mon.sock" "$RUN/qmp.sock" "$RUN/serial.sock"
COMMON=(-nodefaults -no-user-config -display none -m "$MEM" -smp 2
  -kernel "$IMG/vmlinuz" -initrd "$IMG/initrd.gz"
  -drive "file=$IMG/rootfs.img,format=raw,if=virtio,readonly=on" -drive "file=$RUN/data.img,format=raw,if=virtio"
  -monitor "unix:$RUN/mon.sock,server=on,wait=off" -qmp "unix:$RUN/qmp.sock,server=on,wait=off"
  -netdev "$NET")
if [ $FG = 1 ]; then COMMON+=(-serial mon:stdio)
else COMMON+=(-chardev "socket,id=ser0,path=$RUN/serial.sock,server=on,wait=off,logfile=$RUN/serial.log"
              -serial chardev:ser0 -daemonize -pidfile "$RUN/qemu.pid"); fi
case $A in
  amd64) CMD=(qemu-system-x86_64 -machine q35,accel=tcg "${COMMON[@]}"
              -append "console=ttyS0 quiet panic=-1 vt.global_cursor_default=0"
              -device "$([ $GPU = bochs ] && echo bochs-display || echo virtio-gpu-pci)" -device e1000,netdev=n0,romfile=) ;;
  arm64) CMD=(qemu-system-aarch64 -machine virt -cpu cortex-a72 -accel tcg,thread=multi "${COMMON[@]}"
              -append "console=ttyAMA0 quiet panic=-1 vt.global_cursor_default=0"
              -device virtio-gpu-pci -device virtio-net-pci,netdev=n0,romfile=) ;;
esac
cat <<EOF2
board-sim: $A  (kernel $(cat "$IMG/KVER"), TCG)
  serial console : socat -,raw,echo=0,escape=0x1d UNIX-CONNECT:$RUN/serial.sock   (Ctrl-] leaves; log: $RUN/serial.log)
  HMP monitor    : socat - UNIX-CONNECT:$RUN/mon.sock          QMP: $RUN/qmp.sock
  guest httpd    : curl http://127.0.0.1:$HTTP/   (serves /www in the guest)$(for f in ${FWD[@]+"${FWD[@]}"}; do printf '\n                   127.0.0.1:%s -> guest :%s' "${f%%:*}" "${f#*:}"; done)
  press button   : in the guest shell: button press  |  button release  |  button get
                   from the host: echo 'button press' | socat - UNIX-CONNECT:$RUN/serial.sock
  feed the mic   : in the guest: docent audio play /tmp/question.raw --device mic_feed --rate 16000
                   (S16_LE mono; docent captures "mic")
  record speaker : in the guest: docent audio record /run/www/speaker.wav --device speaker_tap --seconds 10
                   then from the host: curl -O http://127.0.0.1:$HTTP/speaker.wav
  screendump     : echo 'screendump $RUN/screen.ppm' | socat - UNIX-CONNECT:$RUN/mon.sock
                   (shows what docent drew through DRM)
  stop           : echo quit | socat - UNIX-CONNECT:$RUN/mon.sock
EOF2
log "starting: ${CMD[*]}"
exec "${CMD[@]}"
