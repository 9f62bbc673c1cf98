# nooelint: oelint.var.suggestedvar.BUGTRACKER,oelint.var.suggestedvar.CVE_PRODUCT - an image: its packages carry these
SUMMARY = "docent kiosk appliance image"
DESCRIPTION = "Read-only root file system with the docent kiosk, espeak-ng and the offline \
               speech model; persistent data on its own ext4 partition mounted at /data; no \
               login on the display."
SECTION = "images"
LICENSE = "MIT"

inherit core-image

IMAGE_FEATURES += "read-only-rootfs"
IMAGE_LINGUAS = ""

# alsa-utils is split per program in oe-core (there is no "alsa-utils-minimal" package):
# aplay/arecord and amixer are enough to check the card on the kiosk. ca-certificates: the
# cloud providers' HTTPS certificates are checked against it (docent starts without it, but
# then no HTTPS provider can be reached).
IMAGE_INSTALL = "packagegroup-core-boot \
                 docent \
                 docent-asound-conf \
                 espeak-ng \
                 pocketsphinx \
                 alsa-utils-aplay \
                 alsa-utils-amixer \
                 e2fsprogs-e2fsck \
                 ca-certificates \
                 ${CORE_IMAGE_EXTRA_INSTALL} \
                 "

# systemd boots to multi-user (no graphical target, no display manager).
SYSTEMD_DEFAULT_TARGET = "multi-user.target"

# The image is partitioned by wic: boot, read-only root, and the data partition, which wic adds
# to /etc/fstab so that systemd mounts it at /data (the docent recipe ships the mount point).
# Set with "=", not "?=": meta-raspberrypi's machine configuration already sets
# WKS_FILE ?= "sdimage-raspberrypi.wks" (no data partition). Another layout for this image:
# WKS_FILE:pn-docent-image in local.conf.
IMAGE_FSTYPES += "wic wic.bmap"
WKS_FILE = "docent.wks"
WKS_FILE:qemuarm64 = "docent-qemu.wks"

# No shell login on the display: docent owns it (DRM/fbdev). Only the serial console
# (SERIAL_CONSOLES, serial-getty@) offers a login. Mask the getty on tty1 and turn autovt off.
ROOTFS_POSTPROCESS_COMMAND += "docent_no_display_getty"

docent_no_display_getty[doc] = "Masks the getty of the display (tty1, autovt) and turns logind's autovt off"

docent_no_display_getty() {
    install -d ${IMAGE_ROOTFS}${sysconfdir}/systemd/system
    ln -sf /dev/null ${IMAGE_ROOTFS}${sysconfdir}/systemd/system/getty@tty1.service
    ln -sf /dev/null ${IMAGE_ROOTFS}${sysconfdir}/systemd/system/autovt@.service
    install -d ${IMAGE_ROOTFS}${sysconfdir}/systemd/logind.conf.d
    printf '[Login]\nNAutoVTs=0\nReserveVT=0\n' > ${IMAGE_ROOTFS}${sysconfdir}/systemd/logind.conf.d/docent-no-vt.conf
}
