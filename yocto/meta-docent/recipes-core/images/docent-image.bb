# nooelint: oelint.var.suggestedvar.BUGTRACKER,oelint.var.suggestedvar.CVE_PRODUCT - an image: its packages carry these
SUMMARY = "docent kiosk appliance image"
DESCRIPTION = "Read-only root file system with the docent kiosk, espeak-ng and the offline \
               speech model; persistent data on its own ext4 partition mounted at /data; no \
               login on the display."
SECTION = "images"
LICENSE = "MIT"

inherit core-image

# The boards whose boot and layout the image is made for (docent-boot, files/wic/docent.wks).
COMPATIBLE_MACHINE = "^(qemuarm64|raspberrypi4-64)$"

IMAGE_FEATURES += "read-only-rootfs"
IMAGE_LINGUAS = ""

# alsa-utils is split per program in oe-core (there is no "alsa-utils-minimal" package):
# aplay/arecord and amixer are enough to check the card on the kiosk. ca-certificates: the
# cloud providers' HTTPS certificates are checked against it (docent starts without it, but
# then no HTTPS provider can be reached). kernel-image: the kernel lives in each root slot
# (/boot/Image), where board/boot/boot.cmd loads it from, so an update of a slot updates its
# kernel too. docent-boot: fw_env.config and the tools that read and write the boot state.
# docent-console: the technician's root shell on the serial console, without a password (root
# itself stays locked: nothing else offers a login).
# rauc, rauc-service (its D-Bus service, which docent calls) and rauc-conf (the board's
# system.conf, keyring and bus policy: recipes-core/rauc) install updates into the other slot;
# os-release carries the firmware's version (VERSION_ID = DISTRO_VERSION), which docent reports.
IMAGE_INSTALL = "packagegroup-core-boot \
                 docent \
                 rauc \
                 rauc-service \
                 rauc-conf \
                 os-release \
                 docent-asound-conf \
                 docent-console \
                 docent-boot \
                 espeak-ng \
                 pocketsphinx \
                 pocketsphinx-en-us \
                 alsa-utils-aplay \
                 alsa-utils-amixer \
                 e2fsprogs-e2fsck \
                 ca-certificates \
                 kernel-image \
                 ${MACHINE_EXTRA_RDEPENDS} \
                 ${CORE_IMAGE_EXTRA_INSTALL} \
                 "
# What the machine recommends (packagegroup-base would bring it, which this image does not
# use): on the Pi 4 the kernel modules, udev-rules-rpi and the Wi-Fi/Bluetooth firmware.
# Installed when they can be, as recommendations are.
PACKAGE_INSTALL_ATTEMPTONLY += "${MACHINE_EXTRA_RRECOMMENDS}"
# rauc recommends rauc-mark-good, a unit that marks every booted slot good as soon as the system
# is up: docent does that itself, and only once it serves (its health gate, issue #21), so a
# bad update is rolled back instead of being accepted.
BAD_RECOMMENDATIONS += "rauc-mark-good"

# systemd boots to multi-user (no graphical target, no display manager).
SYSTEMD_DEFAULT_TARGET = "multi-user.target"

# The partition table of every docent board (board/layout/partitions, turned into
# files/wic/docent.wks by scripts/generate-wks.py): boot, boot state, root A, root B, data.
# Set with "=", not "?=": meta-raspberrypi's machine configuration already sets
# WKS_FILE ?= "sdimage-raspberrypi.wks" (one root, no data partition).
IMAGE_FSTYPES += "wic wic.bmap ext4"
WKS_FILE = "docent.wks"
# The ext4 image is the root slot an update writes (docent-bundle): exactly a slot's size
# (rootA/rootB in board/layout/partitions, 512 MiB, in KiB; ci-check.sh compares them), and a
# root file system that outgrows the slot fails the build here, not the install on a kiosk.
IMAGE_ROOTFS_SIZE = "524288"
IMAGE_ROOTFS_MAXSIZE = "524288"
IMAGE_OVERHEAD_FACTOR = "1.0"
IMAGE_ROOTFS_EXTRA_SPACE = "0"
# The boot partition gets the boot script and the boot state partition its first state.
# nooelint: oelint.vars.mispell.unknown - the wic image task of image_types_wic.bbclass
do_image_wic[depends] += "docent-boot:do_deploy"
# bootstate.txt: the board's factory boot state, which boot.cmd falls back to.
# Pi 4: firmware, config.txt, device trees, U-Boot as kernel8.img and boot.scr; not the kernel,
# which is in the root slots (meta-raspberrypi would copy it to the boot partition too).
# nooelint: oelint.vars.mispell.unknown - meta-raspberrypi's (conf/machine/include/rpi-base.inc)
RPI_EXTRA_IMAGE_BOOT_FILES = "u-boot.bin;${SDIMG_KERNELIMAGE} boot.scr bootstate.txt"

# qemuarm64, as the simulated board: QEMU runs U-Boot (-bios), which runs boot.scr from the
# boot partition, which boots the kernel of a root slot. runqemu must neither pass -kernel
# nor look for a kernel outside the image: the wic image holds it (kernel-in-fs).
IMAGE_BOOT_FILES:qemuarm64 = "boot.scr bootstate.txt"
EXTRA_IMAGEDEPENDS:append:qemuarm64 = " u-boot"
QB_DEFAULT_FSTYPE:qemuarm64 = "wic"
# nooelint: oelint.vars.mispell.unknown - read by runqemu (qemuboot.bbclass writes it)
QB_FSINFO:qemuarm64 = "wic:kernel-in-fs"
# nooelint: oelint.vars.mispell.unknown - read by runqemu (qemuboot.bbclass writes it)
QB_DEFAULT_BIOS:qemuarm64 = "u-boot.bin"
QB_DEFAULT_KERNEL:qemuarm64 = "none"

# No shell login on the display: docent owns it (DRM/fbdev). Only the serial console
# (SERIAL_CONSOLES, serial-getty@) offers a shell: docent-console's drop-in makes its getty start
# the technician's root shell. Mask the getty on tty1 and turn autovt off.
ROOTFS_POSTPROCESS_COMMAND += "docent_no_display_getty"

docent_no_display_getty[doc] = "Masks the getty of the display (tty1, autovt) and turns logind's autovt off"

docent_no_display_getty() {
    install -d ${IMAGE_ROOTFS}${sysconfdir}/systemd/system
    ln -sf /dev/null ${IMAGE_ROOTFS}${sysconfdir}/systemd/system/getty@tty1.service
    ln -sf /dev/null ${IMAGE_ROOTFS}${sysconfdir}/systemd/system/autovt@.service
    install -d ${IMAGE_ROOTFS}${sysconfdir}/systemd/logind.conf.d
    printf '[Login]\nNAutoVTs=0\nReserveVT=0\n' > ${IMAGE_ROOTFS}${sysconfdir}/systemd/logind.conf.d/docent-no-vt.conf
}
