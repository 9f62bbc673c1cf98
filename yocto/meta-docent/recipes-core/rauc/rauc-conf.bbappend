# The board's RAUC configuration, where the project's boards have it (board/<MACHINE>/rauc-system.conf
# as /etc/rauc/system.conf, which names /etc/rauc/keyring.pem), and who may call RAUC
# (board/rauc/docent-rauc.conf: the docent group), installed from the project's tree
# (docent-source.inc, the same address and commit as docent's), so the layer carries no copies:
# meta-rauc's example system.conf is not fetched, the project is (into ${UNPACKDIR}/docent, at
# DOCENT_SRCREV: the url's rev, as an append may not set SRCREV). system.conf is the MACHINE's,
# so the package is machine-specific. Only for the docent distro: with another, meta-rauc's
# recipe stays as it is, and the address is not even read.
require ${@'recipes-kiosk/docent/docent-source.inc' if 'docent-os' in d.getVar('DISTROOVERRIDES').split(':') else ''}

SRC_URI:remove:docent-os = "file://system.conf"
SRC_URI:append:docent-os = " ${DOCENT_GIT_URI};destsuffix=docent;rev=${DOCENT_SRCREV}"

DOCENT_BOARD:docent-os = "${UNPACKDIR}/docent/board"

PACKAGE_ARCH:docent-os = "${MACHINE_ARCH}"

# meta-rauc installs into /usr/lib/rauc; RAUC reads /etc/rauc first, and the project's boards
# (and docent's documentation) have the files in /etc/rauc. The root file system is read-only:
# either place is part of the signed image. The keyring is RAUC_KEYRING_FILE
# (conf/distro/docent-os.conf: ca.cert.pem in DOCENT_RAUC_KEY_DIR).
do_install:docent-os() {
    install -d ${D}${sysconfdir}/rauc
    install -m 0644 ${DOCENT_BOARD}/${MACHINE}/rauc-system.conf ${D}${sysconfdir}/rauc/system.conf
    install -m 0644 ${UNPACKDIR}/${RAUC_KEYRING_FILE} ${D}${sysconfdir}/rauc/keyring.pem
    install -d ${D}${datadir}/dbus-1/system.d
    install -m 0644 ${DOCENT_BOARD}/rauc/docent-rauc.conf ${D}${datadir}/dbus-1/system.d/docent-rauc.conf
    # A development CA (scripts/make-dev-ca.sh marks its folder): its key lies unguarded in a
    # build directory, and its name says nothing about who signs.
    if [ -e "$(dirname ${RAUC_KEYRING_FILE})/DEVELOPMENT-CA" ]; then
        bbwarn "the image trusts a development CA (${RAUC_KEYRING_FILE}): not for a museum's kiosk; set DOCENT_RAUC_KEY_DIR"
    fi
}

FILES:${PN}:append:docent-os = " ${sysconfdir}/rauc ${datadir}/dbus-1/system.d/docent-rauc.conf"
