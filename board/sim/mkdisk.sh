#!/usr/bin/env bash
# mkdisk.sh [--board qemuarm64|raspberrypi4-64] --docent BIN [--version V] [--keyring CA.pem]
#   ->  $DOCENT_SIM_HOME/img/arm64/{disk.img,partitions,u-boot.bin}   (qemuarm64, the default)
#   ->  $DOCENT_SIM_HOME/img/raspberrypi4-64/disk.img                 (raspberrypi4-64: ./x image)
# The simulated aarch64 board's disk, in the layout of every docent board (board/layout):
#   boot       FAT: boot.scr (board/boot/boot.cmd) and bootstate.txt (the board's factory boot
#              state, read when the bootstate partition's checksum fails); U-Boot itself is
#              QEMU's -bios here
#   bootstate  the U-Boot environment of the boot state (board/layout/bootstate.env + the
#              board's kernel arguments, board/qemuarm64/bootargs), made by mkenvimage
#   rootA/B    the same read-only ext4 root in both slots: Debian 12's arm64 packages (systemd,
#   rootA/B    the same read-only ext4 root in both slots (rootfs.sh, which ./x bundle uses
#              too): Debian 12's arm64 packages (systemd, udev, dbus, libubootenv-tool, RAUC,
#              busybox, alsa-lib's data, espeak-ng, PocketSphinx and its en-us model) unpacked
#              with dpkg-deb (no arm64 code runs here), the kernel (/boot/Image) with a small
#              initramfs (/boot/initrd.img) and the modules the board uses, docent (BIN: the
#              static release binary), the board's systemd units, udev rules, tmpfiles and
#              sysusers files, RAUC's system.conf, keyring and D-Bus policy, its profile
#              (board/qemuarm64), and the test rig's units (board/sim/guest: gpio-sim, the
#              console shell, httpd)
# What a package's maintainer scripts would do is done here by hand, with this machine's
# systemd tools working on the tree (--root): users and groups (systemd-sysusers), enabled
# and masked units (systemctl), modules.dep (depmod); plus an empty /etc/machine-id (systemd
# makes one per boot on a read-only /etc), /etc/fstab and the merged /usr.
# partitions lists each partition's name, first sector and sectors (the test writes into them).
# --board raspberrypi4-64 makes the same disk for a Raspberry Pi 4 (never booted on one here):
# the boot partition also holds the Pi firmware (raspi-firmware), U-Boot (u-boot-rpi), the device
# tree (from Debian's kernel) and board/raspberrypi4-64/config.txt; the root has that profile,
# the modules of the Pi's devices and no test rig. --board is the board's folder under board/,
# named by its Yocto MACHINE.
# --version V: the image's version, VERSION_ID in /etc/os-release (default: Cargo.toml's).
# --keyring CA.pem: the certificate(s) an update bundle must be signed under (default: the test
# CA under $DOCENT_SIM_HOME/rauc-ca, made here if missing; see rootfs.sh).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/rootfs.sh"
while [ $# -gt 0 ]; do
  root_option "$@" || die "unknown option $1"
  shift 2
done
[ -n "$KEYRING" ] || { test_ca; KEYRING=$TEST_CA/ca.cert.pem; }
root_setup
O=$SIM_HOME/img/$A; [ $SIM = yes ] || O=$SIM_HOME/img/$NAME
mkdir -p "$O"
W=$SIM_HOME/work/$NAME; rm -rf "$W"; mkdir -p "$W"
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
F=$W/root
root_tree "$F"
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
  mcopy -i "$W/boot.img" "$PI/u/usr/lib/u-boot/rpi_arm64/u-boot.bin" "$PROFILE/config.txt" \
    "$PI/f/usr/lib/raspi-firmware/start4.elf" "$PI/f/usr/lib/raspi-firmware/fixup4.dat" \
    "$K/usr/lib/linux-image-$KVER/broadcom/$RPI4_DTB" ::
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

