#!/usr/bin/env bash
# mkimage.sh ARCH --docent BIN   ->  $DOCENT_SIM_HOME/img/ARCH/{vmlinuz,initrd.gz,rootfs.img,data-blank.img}
# The simulated board's flashable parts, laid out like the appliance image:
#   initrd.gz       busybox initramfs: loads the board's kernel modules (Debian's, in modprobe
#                   order, plus the out-of-tree gpio-sim.ko), mounts the root read-only and the
#                   data partition at /data, switch_root (guest/initramfs-init)
#   rootfs.img      ext4, mounted read-only: busybox, /sbin/init (guest/board-init), docent,
#                   the board profile (board/qemu-ARCH: docent.toml, asound.conf), the systemd
#                   unit and first-boot script from board/ (run by guest/unit-run), alsa-lib's
#                   /usr/share/alsa, and the offline speech engine (espeak-ng, PocketSphinx
#                   with its en-us model) with their shared libraries: on amd64 as installed on
#                   this machine, on arm64 from Debian's arm64 packages
#   data-blank.img  an empty ext4 data partition (the test copies it for each board)
# BIN may be static (the aarch64 release) or dynamic (a native build: its libraries are copied).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
A=$(norm_arch "${1:-}"); shift
BIN=""
while [ $# -gt 0 ]; do
  case "$1" in
    --docent) BIN=$2; shift 2 ;;
    *) die "unknown option $1" ;;
  esac
done
[ -f "$BIN" ] || die "--docent BIN: no such file '$BIN'"
BOARD=$(cd "$BOARD_SIM_DIR/.." && pwd)
case $A in
  amd64) PROFILE=$BOARD/qemu-x86_64; MODS="configfs virtio_pci virtio-gpu virtio_blk ext4 snd-aloop e1000" ;;
  arm64) PROFILE=$BOARD/qemu-aarch64; MODS="configfs virtio_pci virtio-gpu virtio_blk ext4 snd-aloop virtio_net" ;;
esac
KVER=$(kver_of $A); K=$SIM_HOME/kernel/$A
GS=$SIM_HOME/gpio-sim/$A/gpio-sim.ko; [ -f "$GS" ] || die "no $GS: run build-gpio-sim.sh $A"
BB=$SIM_HOME/busybox/$A/bin/busybox; [ -x "$BB" ] || die "no busybox: run fetch-kernel.sh $A"
O=$SIM_HOME/img/$A; mkdir -p "$O"
APPLETS=$("$BB" --list-full 2>/dev/null || busybox --list-full 2>/dev/null || true)
[ -n "$APPLETS" ] || die "cannot list busybox applets (install busybox-static)"
busybox_into() { # busybox_into DIR: busybox and its applet links
  mkdir -p "$1/bin"; cp "$BB" "$1/bin/busybox"
  for app in $APPLETS; do [ -e "$1/$app" ] || { mkdir -p "$1/$(dirname "$app")"; ln -s /bin/busybox "$1/$app"; }; done
}

# --- initramfs ---
R=$O/initramfs; rm -rf "$R"; mkdir -p "$R"/{etc,proc,sys,dev,lib/modules/$KVER}
[ -f "$K/lib/modules/$KVER/modules.dep" ] || depmod -b "$K" "$KVER"
: > "$R/etc/modules.load"
for m in $MODS; do
  modprobe -d "$K" -S "$KVER" --show-depends "$m" | awk '$1=="insmod"{print $2}' | while read -r ko; do
    rel=${ko#$K}; grep -qxF "$rel" "$R/etc/modules.load" && continue
    mkdir -p "$R$(dirname "$rel")"; cp "$ko" "$R$rel"; echo "$rel" >> "$R/etc/modules.load"
  done
done
cp "$GS" "$R/lib/modules/$KVER/gpio-sim.ko"; echo "/lib/modules/$KVER/gpio-sim.ko" >> "$R/etc/modules.load"
busybox_into "$R"
install -m 0755 "$BOARD_SIM_DIR/guest/initramfs-init" "$R/init"
(cd "$R" && find . | cpio -o -H newc --quiet | gzip -1 > "$O/initrd.gz")
cp "$K/boot/vmlinuz-$KVER" "$O/vmlinuz"; echo "$KVER" > "$O/KVER"

# --- read-only root ---
F=$O/rootfs; rm -rf "$F"; mkdir -p "$F"/{dev,proc,sys,run,tmp,data,etc/docent,usr/bin,usr/share,usr/libexec/docent,lib/systemd/system}
busybox_into "$F"
install -m 0755 "$BOARD_SIM_DIR/guest/board-init" "$F/sbin/init"
install -m 0755 "$BOARD_SIM_DIR/guest/unit-run" "$F/usr/libexec/unit-run"
install -m 0755 "$BOARD_SIM_DIR/guest/hotplug" "$F/usr/libexec/hotplug"
install -m 0755 "$BOARD_SIM_DIR/guest/button" "$F/usr/bin/button"
install -m 0644 "$BOARD/systemd/docent.service" "$F/lib/systemd/system/docent.service"
# Users and groups as the image's recipe makes them: docent runs as its own user, a member of
# the groups its unit names (SupplementaryGroups=), which own the device nodes (board-init).
UNIT_GROUPS=$(sed -n 's/^SupplementaryGroups=//p' "$BOARD/systemd/docent.service" | tail -n1)
printf '%s\n' 'root:x:0:0:root:/root:/bin/sh' 'docent:x:998:998::/nonexistent:/bin/false' > "$F/etc/passwd"
{ echo 'root:x:0:'; echo 'docent:x:998:'; gid=990
  for g in $UNIT_GROUPS; do echo "$g:x:$gid:docent"; gid=$((gid + 1)); done; } > "$F/etc/group"
install -m 0755 "$BOARD/firstboot.sh" "$F/usr/libexec/docent/firstboot.sh"
install -m 0644 "$PROFILE/docent.toml" "$F/etc/docent/docent.toml"
install -m 0644 "$PROFILE/asound.conf" "$F/etc/asound.conf"
cp -r /usr/share/alsa "$F/usr/share/alsa"        # alsa-lib's configuration (static or shared)
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then      # as the image's ca-certificates
  mkdir -p "$F/etc/ssl/certs"; cp /etc/ssl/certs/ca-certificates.crt "$F/etc/ssl/certs/"
fi
# A native build loses its debug info (a debug binary is 250 MB with it); the cross-built
# release binary is stripped already, and this machine's objcopy cannot read it anyway.
objcopy --strip-debug "$BIN" "$F/usr/bin/docent" 2>/dev/null || cp "$BIN" "$F/usr/bin/docent"
# Shared libraries of dynamic programs, as ldd resolves them on this machine.
copy_libs() {
  ldd "$@" 2>/dev/null | awk '/=> \//{print $3} /^\t\/.*ld-linux/{print $1}' | sort -u | while read -r lib; do
    mkdir -p "$F$(dirname "$lib")"; cp -L "$lib" "$F$lib"
  done
}
if file -b "$F/usr/bin/docent" | grep -q 'dynamically linked'; then
  [ "$A" = "$(dpkg --print-architecture)" ] || die "a dynamic docent for $A cannot take this machine's libraries"
  copy_libs "$F/usr/bin/docent"
fi
SPEECH=no
if [ "$A" != "$(dpkg --print-architecture)" ]; then
  # Another architecture: the same Debian packages for it, with their dependencies (one of each
  # alternative: reference BLAS, libsystemd0), unpacked once into the cache.
  S=$SIM_HOME/speech/$A
  if [ ! -f "$S/.done" ]; then
    apt_priv_update
    mapfile -t PKGS < <(apt_cache_priv depends --recurse --no-recommends --no-suggests --no-conflicts \
        --no-breaks --no-replaces --no-enhances "espeak-ng:$A" "pocketsphinx:$A" pocketsphinx-en-us 2>/dev/null \
      | grep -v '^[ <]' | grep -Ev '^(libatlas|libblis|libopenblas|libelogind|libgomp)' | sort -u)
    fetch_debs "${PKGS[@]}"
    rm -rf "$S"; mkdir -p "$S"
    for p in "${PKGS[@]}"; do dpkg -x "$(deb_path "${p%%:*}" "$A")" "$S"; done
    rm -rf "$S"/usr/share/{doc,man,locale,lintian,bug,bash-completion} "$S"/usr/share/pocketsphinx/model/en-us/*.lm.bin
    # The links update-alternatives would make at installation (BLAS and LAPACK).
    for f in "$S"/usr/lib/*/blas/libblas.so.3 "$S"/usr/lib/*/lapack/liblapack.so.3; do
      [ -f "$f" ] && ln -sf "$(basename "$(dirname "$f")")/$(basename "$f")" "$(dirname "$(dirname "$f")")/"
    done
    touch "$S/.done"
  fi
  cp -a "$S/." "$F/"; rm -f "$F/.done"
  SPEECH=yes
elif command -v espeak-ng >/dev/null && command -v pocketsphinx_continuous >/dev/null; then
  # The offline engine: espeak-ng (a separate process: GPL) and PocketSphinx with the en-us
  # acoustic model and pronouncing dictionary (the language model is not used: docent builds a
  # grammar from the character's knowledge).
  SPEECH=yes
  cp "$(command -v espeak-ng)" "$(command -v pocketsphinx_continuous)" "$F/usr/bin/"
  copy_libs "$(command -v espeak-ng)" "$(command -v pocketsphinx_continuous)"
  d=$(dirname "$(dpkg -L espeak-ng-data | grep -m1 '/espeak-ng-data/phontab$')")
  mkdir -p "$F$(dirname "$d")"; cp -r "$d" "$F$d"
  M=/usr/share/pocketsphinx/model/en-us
  mkdir -p "$F$M"; cp -r "$M/en-us" "$M/cmudict-en-us.dict" "$F$M/"
fi
size=$(( $(du -sm "$F" | cut -f1) * 5 / 4 + 16 ))
rm -f "$O/rootfs.img"
mke2fs -q -t ext4 -L root -d "$F" "$O/rootfs.img" "${size}M" >/dev/null
rm -f "$O/data-blank.img"
mke2fs -q -t ext4 -L data "$O/data-blank.img" 96M >/dev/null
log "ok: $O: initrd.gz ($(du -h "$O/initrd.gz" | cut -f1), $(wc -l < "$R/etc/modules.load") modules), rootfs.img (${size} MB, speech engine: $SPEECH), data-blank.img"
