# nooelint: oelint.file.underscores,oelint.var.bbclassextend,oelint.var.mandatoryvar.SRC_URI,oelint.var.suggestedvar.CVE_PRODUCT - a bundle of an image: no version of its own (DISTRO_VERSION), no sources, no native variant; the image's packages carry CVE_PRODUCT
SUMMARY = "docent update: a signed RAUC bundle of the docent image's root file system"
DESCRIPTION = "A verity RAUC bundle with the ext4 root file system of docent-image, for one \
               board (its compatible), versioned as the distribution (DISTRO_VERSION), signed \
               with RAUC_KEY_FILE/RAUC_CERT_FILE and checked against the keyring the image \
               trusts. Uploaded on the console's System page, RAUC writes it into the other \
               root slot."
# PLACEHOLDER, as in docent_0.1.0.bb: the project's public address once it has one.
# nooelint: oelint.vars.homepageping
HOMEPAGE = "https://example.invalid/docent"
BUGTRACKER = "https://example.invalid/docent/issues"
SECTION = "images"
LICENSE = "MIT"

inherit bundle

# The boards this layer knows; the compatible of each is the one of its system.conf
# (board/<MACHINE>/rauc-system.conf, in rauc-conf; scripts/check-update-config.py compares them):
# RAUC refuses a bundle for another board.
COMPATIBLE_MACHINE = "^(qemuarm64|raspberrypi4-64)$"
# nooelint: oelint.vars.mispell.unknown - meta-rauc's bundle class
RAUC_BUNDLE_COMPATIBLE:qemuarm64 = "docent-qemu-aarch64"
# nooelint: oelint.vars.mispell.unknown - meta-rauc's bundle class
RAUC_BUNDLE_COMPATIBLE:raspberrypi4-64 = "docent-rpi4"

# The image's version (os-release VERSION_ID): docent compares it with the running one.
# nooelint: oelint.vars.mispell.unknown - meta-rauc's bundle class
RAUC_BUNDLE_VERSION = "${DISTRO_VERSION}"
# nooelint: oelint.vars.mispell.unknown - meta-rauc's bundle class
RAUC_BUNDLE_DESCRIPTION = "docent ${DISTRO_VERSION} for ${MACHINE}"

# Verity: every block is checked against the signed hash tree as RAUC reads it (system.conf
# accepts no other format).
# nooelint: oelint.vars.mispell.unknown - meta-rauc's bundle class
RAUC_BUNDLE_FORMAT = "verity"

# One slot class, rootfs: the ext4 image of docent-image (the kernel is in it, /boot/Image).
# nooelint: oelint.vars.mispell.unknown - meta-rauc's bundle class
RAUC_BUNDLE_SLOTS = "rootfs"
# nooelint: oelint.vars.mispell.unknown - meta-rauc's bundle class
RAUC_SLOT_rootfs = "docent-image"
# nooelint: oelint.vars.mispell.unknown - meta-rauc's bundle class
RAUC_SLOT_rootfs[fstype] = "ext4"

# Signed with RAUC_KEY_FILE and RAUC_CERT_FILE (conf/distro/docent-os.conf); given the keyring,
# `rauc bundle` also verifies the signature: a bundle that the image's own keyring would refuse
# fails here, at build time.
# nooelint: oelint.vars.mispell.unknown - meta-rauc's bundle class
BUNDLE_ARGS += "--keyring=${RAUC_KEYRING_FILE}"
# nooelint: oelint.vars.mispell.unknown - the bundle class's signing task
do_bundle[file-checksums] += "${RAUC_KEYRING_FILE}:False"
