# The Pi's kernel gets what a verity bundle needs (loop, squashfs, device mapper, dm-verity),
# built in: meta-rauc's own configuration fragment, which meta-rauc adds only to linux-yocto
# (the qemuarm64 kernel). Built in (=y), like there: nothing has to load a module first.
# nooelint: oelint.file.requirenotfound - meta-rauc's (recipes-kernel/linux/), found through BBPATH
require ${@bb.utils.contains('DISTRO_FEATURES', 'rauc', 'recipes-kernel/linux/linux-yocto_rauc.inc', '', d)}
