# The Pi's kernel gets what a verity bundle needs (loop, squashfs, device mapper, dm-verity),
# built in: meta-rauc's own configuration fragment, which meta-rauc adds only to linux-yocto
# (the qemuarm64 kernel). Built in (=y), like there: nothing has to load a module first.
# nooelint: oelint.file.requirenotfound - meta-rauc's (recipes-kernel/linux/), found through BBPATH
require ${@bb.utils.contains('DISTRO_FEATURES', 'rauc', 'recipes-kernel/linux/linux-yocto_rauc.inc', '', d)}

# And what lies between the kernel and its root, built in (files/docent-boot.cfg: the SD card's
# controller, its regulators, the watchdog that resets the board after a panic, ext4): the image
# has no initramfs to load modules from. Only for the docent distro.
FILESEXTRAPATHS:prepend:docent-os := "${THISDIR}/files:"
SRC_URI:append:docent-os = " file://docent-boot.cfg"
