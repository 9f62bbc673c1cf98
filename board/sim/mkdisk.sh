#!/usr/bin/env bash
# mkdisk.sh [--board qemu-aarch64|rpi4] --docent BIN
#   ->  $DOCENT_SIM_HOME/img/arm64/{disk.img,partitions,u-boot.bin}   (qemu-aarch64, the default)
#   ->  $DOCENT_SIM_HOME/img/rpi4/disk.img                            (rpi4: ./x image)
# The simulated aarch64 board's disk, in the layout of every docent board (board/layout):
#   boot       FAT: boot.scr (board/boot/boot.cmd) and bootstate.txt (the board's factory boot
#              state, read when the bootstate partition's checksum fails); U-Boot itself is
#              QEMU's -bios here
#   bootstate  the U-Boot environment of the boot state (board/layout/bootstate.env + the
#              board's kernel arguments, board/qemu-aarch64/bootargs), made by mkenvimage
#   rootA/B    the same read-only ext4 root in both slots: Debian 12's arm64 packages (systemd,
#              udev, dbus, libubootenv-tool, busybox, alsa-lib's data, espeak-ng, PocketSphinx
#              and its en-us model) unpacked with dpkg-deb (no arm64 code runs here), the
#              kernel (/boot/Image) with a small initramfs (/boot/initrd.img) and the modules
#              the board uses, docent (BIN: the static release binary), the board's systemd
#              units, udev rules, tmpfiles and sysusers files, its profile (board/qemu-aarch64),
#              and the test rig's units (board/sim/guest: gpio-sim, the console shell, httpd)
#   data       an empty ext4 (/data)
# What a package's maintainer scripts would do is done here by hand, with this machine's
# systemd tools working on the tree (--root): users and groups (systemd-sysusers), enabled
# and masked units (systemctl), modules.dep (depmod); plus an empty /etc/machine-id (systemd
# makes one per boot on a read-only /etc), /etc/fstab and the merged /usr.
# partitions lists each partition's name, first sector and sectors (the test writes into them).
# --board rpi4 makes the same disk for a Raspberry Pi 4 (never booted on one here): the boot
# partition also holds the Pi firmware (raspi-firmware), U-Boot (u-boot-rpi), the device tree
# (from Debian's kernel) and board/rpi4/config.txt; the root has the rpi4 profile, the modules
# of the Pi's devices and no test rig.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
A=arm64
BIN=""; NAME=qemu-aarch64
while [ $# -gt 0 ]; do
  case "$1" in
    --docent) BIN=$2; shift 2 ;;
    --board) NAME=$2; shift 2 ;;
    *) die "unknown option $1" ;;
  esac
done
[ -f "$BIN" ] || die "--docent BIN: no such file '$BIN'"
BOARD=$(cd "$BOARD_SIM_DIR/.." && pwd)
case $NAME in qemu-aarch64|rpi4) ;; *) die "--board qemu-aarch64|rpi4 (got '$NAME')" ;; esac
PROFILE=$BOARD/$NAME
GUEST=$BOARD_SIM_DIR/guest
SIM=no; [ "$NAME" = qemu-aarch64 ] && SIM=yes
KVER=$(kver_of $A); K=$SIM_HOME/kernel/$A
GS=$SIM_HOME/gpio-sim/$A/gpio-sim.ko; [ $SIM = no ] || [ -f "$GS" ] || die "no $GS: run build-gpio-sim.sh $A"
BB=$SIM_HOME/busybox/$A/bin/busybox; [ -x "$BB" ] || die "no busybox: run fetch-kernel.sh $A"
O=$SIM_HOME/img/$A; [ $SIM = yes ] || O=$SIM_HOME/img/$NAME
mkdir -p "$O"
W=$SIM_HOME/work/$NAME; rm -rf "$W"; mkdir -p "$W"

# --- Debian's packages, unpacked once (the speech engine's with their own dependencies) ---
# The root's packages and what they need at run time; maintainer-script-only dependencies
# (debconf, perl, adduser, dpkg) are left out.
ROOT_PKGS=(systemd udev dbus dbus-daemon dbus-bin libubootenv-tool libubootenv0.1 mount kmod
  libacl1 libapparmor1 libaudit1 libblkid1 libcap2 libcap-ng0 libcrypt1 libcryptsetup12 libfdisk1
  libgcrypt20 libgpg-error0 libip4tc2 libkmod2 liblz4-1 liblzma5 libmount1 libpam0g libseccomp2
  libselinux1 libssl3 libsystemd-shared libsystemd0 libzstd1 libpcre2-8-0 libargon2-1
  libdevmapper1.02.1 libjson-c5 libuuid1 libudev1 libsmartcols1 libc6 libgcc-s1 gcc-12-base
  libdbus-1-3 libexpat1 libp11-kit0 libffi8 libbz2-1.0 zlib1g libmd0 libtinfo6 libsepol2)
ROOT_ALL=(dbus-system-bus-common dbus-session-bus-common libaudit-common libasound2-data)
BASE=$SIM_HOME/rootbase/$A
# Unpacked again when the list changes (.done holds the list it was made from).
if [ "$(cat "$BASE/.done" 2>/dev/null)" != "${ROOT_PKGS[*]} ${ROOT_ALL[*]}" ]; then
  fetch_debs "${ROOT_PKGS[@]/%/:$A}" "${ROOT_ALL[@]}"
  rm -rf "$BASE"; mkdir -p "$BASE"
  for p in "${ROOT_PKGS[@]}"; do dpkg-deb -x "$(deb_path "$p" $A)" "$BASE"; done
  for p in "${ROOT_ALL[@]}"; do dpkg-deb -x "$(deb_path "$p")" "$BASE"; done
  rm -rf "$BASE"/usr/share/{doc,man,info,locale,lintian,bug,bash-completion,zsh,fish}
  echo "${ROOT_PKGS[*]} ${ROOT_ALL[*]}" > "$BASE/.done"
fi
S=$SIM_HOME/speech/$A
if [ ! -f "$S/.done" ]; then
  apt_priv_update
  mapfile -t PKGS < <(apt_cache_priv depends --recurse --no-recommends --no-suggests --no-conflicts \
      --no-breaks --no-replaces --no-enhances "espeak-ng:$A" "pocketsphinx:$A" pocketsphinx-en-us 2>/dev/null \
    | grep -v '^[ <]' | grep -Ev '^(libatlas|libblis|libopenblas|libelogind|libgomp)' | sort -u)
  fetch_debs "${PKGS[@]}"
  rm -rf "$S"; mkdir -p "$S"
  for p in "${PKGS[@]}"; do dpkg-deb -x "$(deb_path "${p%%:*}" "$A")" "$S"; done
  rm -rf "$S"/usr/share/{doc,man,locale,lintian,bug,bash-completion} "$S"/usr/share/pocketsphinx/model/en-us/*.lm.bin
  # The links update-alternatives would make at installation (BLAS and LAPACK).
  for f in "$S"/usr/lib/*/blas/libblas.so.3 "$S"/usr/lib/*/lapack/liblapack.so.3; do
    [ -f "$f" ] && ln -sf "$(basename "$(dirname "$f")")/$(basename "$f")" "$(dirname "$(dirname "$f")")/"
  done
  touch "$S/.done"
fi
if [ $SIM = yes ]; then
  fetch_debs u-boot-qemu
  UB=$SIM_HOME/u-boot
  if [ ! -f "$UB/usr/lib/u-boot/qemu_arm64/u-boot.bin" ]; then
    rm -rf "$UB"; mkdir -p "$UB"; dpkg-deb -x "$(deb_path u-boot-qemu)" "$UB"
  fi
  cp "$UB/usr/lib/u-boot/qemu_arm64/u-boot.bin" "$O/u-boot.bin"
else
  # The Pi's boot partition: its firmware (non-free-firmware), U-Boot and device tree.
  fetch_debs u-boot-rpi:$A raspi-firmware
  PI=$SIM_HOME/rpi4-boot
  if [ ! -f "$PI/.done" ]; then
    rm -rf "$PI"; mkdir -p "$PI/u" "$PI/f"
    dpkg-deb -x "$(deb_path u-boot-rpi $A)" "$PI/u"; dpkg-deb -x "$(deb_path raspi-firmware)" "$PI/f"
    touch "$PI/.done"
  fi
fi

# --- the root file system ---
F=$W/root; mkdir -p "$F"
cp -a "$BASE/." "$F/"; rm -f "$F/.done"
cp -a "$S/." "$F/"; rm -f "$F/.done"
# Merged /usr, as Debian 12 installs it: /bin, /sbin, /lib are links into /usr.
for d in bin sbin lib; do
  if [ -d "$F/$d" ] && [ ! -L "$F/$d" ]; then
    mkdir -p "$F/usr/$d"; cp -a "$F/$d/." "$F/usr/$d/"; rm -rf "${F:?}/$d"
  fi
  ln -sfn "usr/$d" "$F/$d"
done
mkdir -p "$F"/{dev,proc,sys,run,tmp,var,data,root,boot,home,mnt,media,opt,srv,etc/docent,usr/libexec/docent,usr/libexec/board}
chmod 1777 "$F/tmp"; chmod 0700 "$F/root"
# systemd-sysv's links: reboot and poweroff ask systemd.
for t in reboot poweroff halt shutdown; do ln -sfn ../bin/systemctl "$F/usr/sbin/$t"; done
# busybox for the shell and the small tools (sh, the first-boot script's tr/head, the test
# rig's wget/base64/httpd), where no package brings the real one.
cp "$BB" "$F/usr/bin/busybox"
# (The list comes from this machine's busybox-static: the same package, and arm64 code does
# not run here.)
APPLETS=$(busybox --list-full) || die "cannot list busybox applets (install busybox-static)"
for app in $APPLETS; do
  [ -e "$F/$app" ] || [ -L "$F/$app" ] || ln -s /usr/bin/busybox "$F/$app"
done
ln -sfn ../lib/systemd/systemd "$F/usr/sbin/init"
# The kernel, its modules (those the board uses) and the initramfs.
cp "$K/boot/vmlinuz-$KVER" "$F/boot/Image"
mods() { # mods MODULE... -> the .ko files with their dependencies, in load order
  for m in "$@"; do modprobe -d "$K" -S "$KVER" --show-depends "$m" >/dev/null || die "no module $m in $KVER"; done
  for m in "$@"; do modprobe -d "$K" -S "$KVER" --show-depends "$m" | awk '$1=="insmod"{print $2}'; done | awk '!seen[$0]++'
}
if [ $SIM = yes ]; then
  ROOT_MODS="virtio_pci virtio_blk ext4 virtio_net virtio-gpu snd-aloop configfs autofs4"
  INITRD_MODS="virtio_pci virtio_blk ext4"
else
  # The Pi 4's SD card (emmc2), display (vc4, v3d), USB (PCIe, xhci), Ethernet, Wi-Fi, USB
  # sound cards, input, watchdog, thermal, RNG, I2C/SPI, and what udev autoloads for them.
  ROOT_MODS="sdhci-iproc bcm2835 ext4 vfat vc4 v3d snd-usb-audio genet broadcom mdio-bcm-unimac
    pcie-brcmstb xhci-pci reset-raspberrypi bcm2835_wdt bcm2711_thermal raspberrypi-cpufreq
    clk-raspberrypi hid-generic usbhid evdev brcmfmac i2c-bcm2835 spi-bcm2835 pwm-bcm2835
    bcm2835-rng iproc-rng200 configfs autofs4"
  INITRD_MODS="sdhci-iproc ext4"
fi
ROOT_KOS=$(mods $ROOT_MODS)
for ko in $ROOT_KOS; do
  rel=${ko#"$K"}; mkdir -p "$F/usr$(dirname "$rel")"; cp "$ko" "$F/usr$rel"
done
if [ $SIM = yes ]; then mkdir -p "$F/usr/lib/modules/$KVER/extra"; cp "$GS" "$F/usr/lib/modules/$KVER/extra/"; fi
cp "$K/lib/modules/$KVER"/modules.{order,builtin,builtin.modinfo} "$F/usr/lib/modules/$KVER/"
depmod -b "$F" "$KVER"
R=$W/initramfs; mkdir -p "$R"/{bin,etc,proc,sys,dev,newroot}
cp "$BB" "$R/bin/busybox"
for app in sh mount umount insmod sed grep sleep mkdir switch_root; do ln -s busybox "$R/bin/$app"; done
ln -s bin "$R/sbin"
INITRD_KOS=$(mods $INITRD_MODS)
for ko in $INITRD_KOS; do
  rel=${ko#"$K"}; mkdir -p "$R$(dirname "$rel")"; cp "$ko" "$R$rel"; echo "$rel" >> "$R/etc/modules.load"
done
install -m 0755 "$GUEST/initramfs-init" "$R/init"
(cd "$R" && find . | cpio -o -H newc --quiet | gzip -1 > "$F/boot/initrd.img")
# docent and the board's files, where the Yocto recipe installs them.
cp "$BIN" "$F/usr/bin/docent"
install -m 0644 "$BOARD/systemd/docent.service" "$BOARD/systemd/docent-firstboot.service" \
  "$BOARD/systemd/docent-boot-ok.service" "$F/usr/lib/systemd/system/"
install -m 0644 "$BOARD/systemd/docent-tmpfiles.conf" "$F/usr/lib/tmpfiles.d/docent.conf"
install -m 0644 "$BOARD/systemd/docent-sysusers.conf" "$F/usr/lib/sysusers.d/docent.conf"
install -m 0644 "$BOARD/udev/70-docent.rules" "$F/usr/lib/udev/rules.d/70-docent.rules"
install -m 0755 "$BOARD/firstboot.sh" "$F/usr/libexec/docent/firstboot.sh"
install -m 0755 "$BOARD/boot/boot-ok.sh" "$F/usr/libexec/docent/boot-ok.sh"
install -m 0644 "$BOARD/layout/fw_env.config" "$F/etc/fw_env.config"
install -m 0644 "$PROFILE/docent.toml" "$F/etc/docent/docent.toml"
install -m 0644 "$PROFILE/asound.conf" "$F/etc/asound.conf"
mkdir -p "$F/etc/systemd/network"
install -m 0644 "$PROFILE/wired.network" "$F/etc/systemd/network/80-wired.network"
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then      # as the image's ca-certificates
  mkdir -p "$F/etc/ssl/certs"; cp /etc/ssl/certs/ca-certificates.crt "$F/etc/ssl/certs/"
fi
RIG=()
if [ $SIM = yes ]; then  # the test rig (simulated board only)
  install -m 0644 "$GUEST/board-gpio-sim.service" "$GUEST/board-console.service" \
    "$GUEST/board-www.service" "$F/usr/lib/systemd/system/"
  install -m 0755 "$GUEST/gpio-sim" "$F/usr/libexec/board/gpio-sim"
  install -m 0755 "$GUEST/button" "$F/usr/bin/button"
  install -D -m 0644 "$GUEST/modules-load.conf" "$F/etc/modules-load.d/board-sim.conf"
  RIG=(board-gpio-sim.service board-console.service board-www.service)
fi
# /etc, as the image's base files and maintainer scripts leave it (read-only at run time).
: > "$F/etc/machine-id"
echo docent > "$F/etc/hostname"
printf '127.0.0.1 localhost\n127.0.1.1 docent\n::1 localhost\n' > "$F/etc/hosts"
printf 'passwd: files systemd\ngroup: files systemd\nshadow: files\nhosts: files\n' > "$F/etc/nsswitch.conf"
cat > "$F/usr/lib/os-release" <<'EOF'
PRETTY_NAME="docent kiosk (simulated board: Debian 12 packages)"
NAME="docent"
ID=docent
ID_LIKE=debian
VERSION_CODENAME=bookworm
EOF
ln -sfn ../usr/lib/os-release "$F/etc/os-release"
cat > "$F/etc/fstab" <<'EOF'
# The root is read-only (ro on the kernel command line, the slot's partition); /data is the
# data partition (board/layout/partitions); /var and /tmp are memory, as nothing on the root
# is written.
PARTLABEL=data  /data  ext4   rw,noatime,nosuid,nodev  0  0
tmpfs           /var   tmpfs  mode=0755,nosuid,nodev   0  0
tmpfs           /tmp   tmpfs  mode=1777,nosuid,nodev   0  0
EOF
mkdir -p "$F/etc/systemd/journald.conf.d"
printf '[Journal]\nStorage=volatile\nRuntimeMaxUse=16M\n' > "$F/etc/systemd/journald.conf.d/board.conf"
systemd-sysusers --root="$F" >/dev/null 2>&1
systemctl --root="$F" set-default multi-user.target >/dev/null 2>&1
systemctl --root="$F" enable docent.service docent-firstboot.service docent-boot-ok.service \
  systemd-networkd.service "${RIG[@]}" >/dev/null 2>&1
# Units that have nothing to do on the board: no login consoles (the test rig's shell is on
# the serial line), no clock from a network that does not reach outside, no first-boot wizard
# (machine-id is made per boot), nothing persistent to seed or commit on a read-only root, no
# logins (no login sessions, no remount of the root, which stays read-only as the initramfs
# mounted it), none of the loop, device-mapper, FUSE, hugepage, message-queue or debug file
# systems, which nothing on the board uses.
systemctl --root="$F" mask getty@.service serial-getty@.service getty-static.service \
  systemd-timesyncd.service systemd-firstboot.service systemd-machine-id-commit.service \
  systemd-random-seed.service systemd-update-utmp.service systemd-update-utmp-runlevel.service \
  systemd-pstore.service systemd-hwdb-update.service systemd-journal-catalog-update.service \
  systemd-sysusers.service ldconfig.service e2scrub_reap.service \
  systemd-remount-fs.service systemd-network-generator.service kmod-static-nodes.service \
  systemd-logind.service systemd-user-sessions.service modprobe@loop.service \
  modprobe@dm_mod.service modprobe@fuse.service modprobe@efi_pstore.service dev-hugepages.mount \
  dev-mqueue.mount sys-kernel-debug.mount sys-kernel-tracing.mount sys-fs-fuse-connections.mount \
  >/dev/null 2>&1
# D-Bus starts when a client first asks for it (dbus.socket), not at every boot.
rm -f "$F/usr/lib/systemd/system/multi-user.target.wants/dbus.service"
root_mib=$(awk '$2=="rootA"{print $4}' "$BOARD/layout/partitions")
used=$(du -sm "$F" | cut -f1)
[ "$used" -lt $((root_mib * 9 / 10)) ] || die "the root needs ${used} MiB, its slot has ${root_mib} MiB"
mke2fs -q -t ext4 -L root -d "$F" "$W/root.img" "${root_mib}M" >/dev/null 2>&1

# --- boot, bootstate, data ---
mkimage -A arm64 -O linux -T script -C none -n "docent boot" -d "$BOARD/boot/boot.cmd" "$W/boot.scr" >/dev/null
boot_mib=$(awk '$2=="boot"{print $4}' "$BOARD/layout/partitions")
mkfs.vfat -n BOOT -C "$W/boot.img" $((boot_mib * 1024)) >/dev/null
{ cat "$BOARD/layout/bootstate.env"; echo "docent_bootargs=$(cat "$PROFILE/bootargs")"; } > "$W/bootstate.txt"
mcopy -i "$W/boot.img" "$W/boot.scr" "$W/bootstate.txt" ::
if [ $SIM = no ]; then
  mcopy -i "$W/boot.img" "$PI/u/usr/lib/u-boot/rpi_arm64/u-boot.bin" "$BOARD/rpi4/config.txt" \
    "$PI/f/usr/lib/raspi-firmware/start4.elf" "$PI/f/usr/lib/raspi-firmware/fixup4.dat" \
    "$K/usr/lib/linux-image-$KVER/broadcom/bcm2711-rpi-4-b.dtb" ::
fi
mkenvimage -s 0x4000 -o "$W/bootstate.img" "$W/bootstate.txt"
data_mib=$(awk '$2=="data"{print $4}' "$BOARD/layout/partitions")
mke2fs -q -t ext4 -L data "$W/data.img" "${data_mib}M" >/dev/null 2>&1

# --- the disk: GPT in the layout's order, each partition written in place ---
ALIGN=8192                                   # sectors: 4 MiB
table=$W/table; parts=$W/partitions
{ echo "label: gpt"; echo "unit: sectors"; echo "first-lba: $ALIGN"; }> "$table"; : > "$parts"
start=$ALIGN
while read -r num name type mib fs _; do
  case "$num" in ''|'#'*) continue ;; esac
  sectors=$((mib * 2048))
  attrs=""; [ "$name" = boot ] && attrs=', attrs="LegacyBIOSBootable"'
  echo "start=$start, size=$sectors, type=$type, name=\"$name\"$attrs" >> "$table"
  echo "$name $start $sectors $fs" >> "$parts"
  start=$(( (start + sectors + ALIGN - 1) / ALIGN * ALIGN ))
done < "$BOARD/layout/partitions"
DISK=$W/disk.img
rm -f "$DISK"; truncate -s $(( (start + ALIGN) * 512 )) "$DISK"
sfdisk -q "$DISK" < "$table"
while read -r name first sectors _; do
  case $name in
    boot) img=$W/boot.img ;; bootstate) img=$W/bootstate.img ;; rootA|rootB) img=$W/root.img ;; data) img=$W/data.img ;;
    *) die "no image for partition $name" ;;
  esac
  dd if="$img" of="$DISK" bs=512 seek="$first" conv=notrunc,sparse status=none
done < "$parts"
mv "$DISK" "$O/disk.img"; cp "$parts" "$O/partitions"; echo "$KVER" > "$O/KVER"
# The slot's kernel and initramfs on their own: the boot-counting test makes a slot whose
# kernel boots but whose root has no init from them.
cp "$F/boot/Image" "$F/boot/initrd.img" "$O/"
log "ok: $O/disk.img ($(du -h --apparent-size "$O/disk.img" | cut -f1), $(du -h "$O/disk.img" | cut -f1) used; root ${used} MiB of ${root_mib} MiB): $(cut -d' ' -f1 "$parts" | tr '\n' ' ')"
rm -rf "$W"
