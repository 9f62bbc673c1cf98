# nooelint: oelint.var.bbclassextend - the boot files of the target board: no native variant
SUMMARY = "docent A/B boot: U-Boot boot script, initial boot state, boot counting in Linux"
DESCRIPTION = "The boot script of every docent board (boot.scr: attempts counted per slot, the \
               other slot after three failed boots, both counters reset when both are spent), \
               the boot state partition's initial U-Boot environment, and what Linux needs to \
               read and write it (fw_printenv/fw_setenv through /etc/fw_env.config)."
# PLACEHOLDER, as in docent_0.1.0.bb: the project's public address once it has one.
# nooelint: oelint.vars.homepageping
HOMEPAGE = "https://example.invalid/docent"
BUGTRACKER = "https://example.invalid/docent/issues"
SECTION = "bootloaders"
CVE_PRODUCT = "docent"
# The project's own files, under the project's licence (the `license` line of its Cargo.toml,
# as in docent_0.1.0.bb).
LICENSE = "MIT | Apache-2.0"
LIC_FILES_CHKSUM = "file://Cargo.toml;beginline=6;endline=6;md5=86b31c7756a1a7962f28b62856ed4f05"

# The boards whose boot this layer knows (board/<MACHINE>/ in the project, files/raspberrypi4-64/
# here); yocto-check-layer's default MACHINE found that other machines could not even parse the
# recipe. These are the MACHINEs the layer supports: each has its folder under board/, named so
# (tests/it/board_files.rs checks both ways).
COMPATIBLE_MACHINE = "^(qemuarm64|raspberrypi4-64)$"

DEPENDS = "u-boot-mkenvimage-native u-boot-mkimage-native"

# meta-raspberrypi's u-boot (RPI_USE_U_BOOT = "1") puts the boot.scr of the provider of
# u-boot-default-script on the boot partition: this recipe's, not rpi-u-boot-scr's (the docent
# distro sets PREFERRED_PROVIDER_u-boot-default-script).
PROVIDES = "u-boot-default-script"

# The project's tree (docent-source.inc, as in docent_0.1.0.bb): board/boot, board/layout,
# board/systemd/docent-boot-ok.service and board/<MACHINE>/bootargs, installed from ${S}, so the
# layer carries no copies. bootargs, the board's kernel arguments (its console), is stored in the
# boot state as docent_bootargs, which boot.cmd adds to root=, ro, panic= and docent.slot=. The
# Pi's is the layer's own (files/raspberrypi4-64/bootargs, console=ttyS0): under
# meta-raspberrypi's kernel the mini UART is ttyS0, while board/raspberrypi4-64/bootargs is for
# Debian's kernel of ./x image (mainline device tree: ttyS1).
require recipes-kiosk/docent/docent-source.inc
SRC_URI = "${DOCENT_GIT_URI}"
SRC_URI:append:raspberrypi4-64 = " file://bootargs"
SRCREV = "${DOCENT_SRCREV}"

DOCENT_BOARD = "${S}/board"
DOCENT_BOOTARGS = "${DOCENT_BOARD}/${MACHINE}/bootargs"
DOCENT_BOOTARGS:raspberrypi4-64 = "${UNPACKDIR}/bootargs"

# What is made here (boot.scr, the boot state, the empty initrd) stays out of the source tree.
B = "${WORKDIR}/build"

inherit deploy kernel-arch systemd

# The size of the environment in the boot state partition (the size in fw_env.config).
DOCENT_BOOTSTATE_SIZE = "0x4000"

do_compile() {
    mkimage -A ${UBOOT_ARCH} -T script -C none -n "docent A/B boot" -d ${DOCENT_BOARD}/boot/boot.cmd ${B}/boot.scr
    # The board's factory state: the bootstate partition's first content, and bootstate.txt on
    # the boot partition, which boot.cmd reads when the partition's checksum fails.
    { cat ${DOCENT_BOARD}/layout/bootstate.env; echo "docent_bootargs=$(cat ${DOCENT_BOOTARGS})"; } > ${B}/bootstate.txt
    uboot-mkenvimage -s ${DOCENT_BOOTSTATE_SIZE} -o ${B}/docent-bootstate.bin ${B}/bootstate.txt
    # boot.cmd boots a slot's /boot/Image with its /boot/initrd.img (Debian's kernel on the
    # simulated board needs one). This image's kernel mounts root=PARTLABEL=... itself: its
    # initrd is an empty archive, and a kernel whose initramfs has no /init goes on to mount
    # the root file system as if it had none.
    printf '' | cpio --quiet -o -H newc > ${B}/initrd.img
}

do_install() {
    install -d ${D}${sysconfdir} ${D}${libexecdir}/docent
    install -m 0644 ${DOCENT_BOARD}/layout/fw_env.config ${D}${sysconfdir}/fw_env.config
    install -m 0755 ${DOCENT_BOARD}/boot/boot-ok.sh ${D}${libexecdir}/docent/boot-ok.sh
    install -d ${D}/boot
    install -m 0644 ${B}/initrd.img ${D}/boot/initrd.img
    install -d ${D}${systemd_system_unitdir}
    install -m 0644 ${DOCENT_BOARD}/systemd/docent-boot-ok.service ${D}${systemd_system_unitdir}/docent-boot-ok.service
}

do_deploy() {
    install -m 0644 ${B}/boot.scr ${DEPLOYDIR}/boot.scr
    install -m 0644 ${B}/docent-bootstate.bin ${DEPLOYDIR}/docent-bootstate.bin
    install -m 0644 ${B}/bootstate.txt ${DEPLOYDIR}/bootstate.txt
}

addtask deploy after do_compile before do_build

PACKAGE_ARCH = "${MACHINE_ARCH}"

# Once docent serves, docent-boot-ok.service runs boot-ok.sh: the booted slot gets its attempts
# back (enabled: multi-user.target).
SYSTEMD_SERVICE:${PN} = "docent-boot-ok.service"
SYSTEMD_AUTO_ENABLE:${PN} = "enable"

FILES:${PN} += "/boot/initrd.img"
CONFFILES:${PN} = "${sysconfdir}/fw_env.config"
RDEPENDS:${PN} = "libubootenv-bin"
# u-boot-env ships meta-raspberrypi's fw_env.config (a file on the FAT partition).
RCONFLICTS:${PN} = "u-boot-env"
