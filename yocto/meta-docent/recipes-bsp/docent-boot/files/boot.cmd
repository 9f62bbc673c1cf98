# boot.cmd: the U-Boot script of every docent board (boot.scr on the boot partition, made with
# `mkimage -A arm64 -T script -C none -d boot.cmd boot.scr`). U-Boot's distro boot runs it with
# devtype/devnum naming the disk it was found on (mmc 0 on a Pi, virtio 0 under QEMU).
#
# A/B with boot counting (board/layout/README.md): the boot state is a U-Boot environment
# (CRC32 + name=value pairs, 16 KiB) at the start of the raw partition "bootstate", the same
# bytes fw_printenv/fw_setenv read and write from Linux (/etc/fw_env.config):
#   BOOT_ORDER     the slots to try, in order ("A B")
#   BOOT_A_LEFT    attempts slot A has left; BOOT_B_LEFT the same for B
#   docent_bootargs the board's own kernel arguments (its console)
# RAUC (board/<board>/rauc-system.conf, bootloader=uboot) reads and writes the same variables
# through fw_setenv: an install puts the new slot first in BOOT_ORDER with 3 attempts, mark-good
# gives the booted slot 3 again, mark-bad sets it to 0. rauc.slot= on the kernel command line
# tells RAUC which slot (bootname) booted.
# Each boot takes one attempt from the first slot in BOOT_ORDER that has any, writes the state
# back and boots that slot; once docent serves, docent-boot-ok.service gives the slot its 3
# attempts back. A slot that cannot boot (no kernel, a kernel that panics: panic=5 resets the
# board) is left after 3 attempts for the next. When no slot has attempts left, both get 3
# again and the board resets: a power cut at any moment cannot leave it stuck here. A state
# whose checksum fails (never written, or a write cut short) counts as the defaults: the
# board's factory state in bootstate.txt on the boot partition, else A B and 3 attempts each.
echo "docent boot: A/B boot script on ${devtype} ${devnum}"
${devtype} dev ${devnum}
setenv docent_state_lba
part start ${devtype} ${devnum} bootstate docent_state_lba || echo "docent boot: no bootstate partition: counting is off"
setenv BOOT_ORDER
setenv BOOT_A_LEFT
setenv BOOT_B_LEFT
setenv docent_bootargs
if test -n "${docent_state_lba}" && ${devtype} read ${kernel_addr_r} ${docent_state_lba} 0x20 && env import -c ${kernel_addr_r} 0x4000 BOOT_ORDER BOOT_A_LEFT BOOT_B_LEFT docent_bootargs; then
  echo "docent boot: state: order ${BOOT_ORDER}, A ${BOOT_A_LEFT} left, B ${BOOT_B_LEFT} left"
else
  # The board's factory state, a text file on the boot partition (written with the image).
  echo "docent boot: no valid boot state: the defaults"
  if load ${devtype} ${devnum}:${distro_bootpart} ${kernel_addr_r} bootstate.txt; then
    env import -t ${kernel_addr_r} ${filesize} BOOT_ORDER BOOT_A_LEFT BOOT_B_LEFT docent_bootargs
  fi
fi
test -n "${BOOT_ORDER}" || setenv BOOT_ORDER "A B"
test -n "${BOOT_A_LEFT}" || setenv BOOT_A_LEFT 3
test -n "${BOOT_B_LEFT}" || setenv BOOT_B_LEFT 3

setenv docent_slot
for s in ${BOOT_ORDER}; do
  if test -z "${docent_slot}"; then
    if test "${s}" = A && test ${BOOT_A_LEFT} -gt 0; then
      setexpr BOOT_A_LEFT ${BOOT_A_LEFT} - 1
      setenv docent_slot A
    elif test "${s}" = B && test ${BOOT_B_LEFT} -gt 0; then
      setexpr BOOT_B_LEFT ${BOOT_B_LEFT} - 1
      setenv docent_slot B
    fi
  fi
done
if test -z "${docent_slot}"; then
  echo "docent boot: no slot has attempts left: both get 3 again"
  setenv BOOT_A_LEFT 3
  setenv BOOT_B_LEFT 3
fi
# The state is written before the slot is tried: an attempt counts even if it never returns.
if test -n "${docent_state_lba}"; then
  env export -c -s 0x4000 ${kernel_addr_r} BOOT_ORDER BOOT_A_LEFT BOOT_B_LEFT docent_bootargs
  ${devtype} write ${kernel_addr_r} ${docent_state_lba} 0x20
fi
if test -z "${docent_slot}"; then
  reset
fi

echo "docent boot: slot ${docent_slot} (attempts left: A ${BOOT_A_LEFT}, B ${BOOT_B_LEFT})"
part number ${devtype} ${devnum} root${docent_slot} docent_root
setenv bootargs "root=PARTLABEL=root${docent_slot} ro rootwait panic=5 docent.slot=${docent_slot} rauc.slot=${docent_slot} ${docent_bootargs}"
# The initramfs is optional: a kernel with its disk and ext4 drivers built in needs none.
# The kernel may be compressed (the Pi 4's is gzip: a third to read from the card): booti
# unpacks it to kernel_comp_addr_r, 64 MiB above the initramfs, out of everything loaded here.
if load ${devtype} ${devnum}:${docent_root} ${kernel_addr_r} /boot/Image; then
  setenv kernel_comp_size ${filesize}
  setexpr kernel_comp_addr_r ${ramdisk_addr_r} + 0x4000000
  if load ${devtype} ${devnum}:${docent_root} ${ramdisk_addr_r} /boot/initrd.img; then
    booti ${kernel_addr_r} ${ramdisk_addr_r}:${filesize} ${fdtcontroladdr}
  else
    booti ${kernel_addr_r} - ${fdtcontroladdr}
  fi
fi
echo "docent boot: slot ${docent_slot} did not boot; the board resets"
reset
