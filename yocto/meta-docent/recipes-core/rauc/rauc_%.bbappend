# RAUC on the kiosk: the D-Bus service (rauc-service) that docent calls, nothing it does not use.
# Only for the docent distro: with another, meta-rauc's recipe stays as it is.
FILESEXTRAPATHS:prepend:docent-os := "${THISDIR}/files:"

# RAUC's own bus policy lets every local user call it; this one lets only root (docent's group is
# docent-rauc.conf's, in rauc-conf).
SRC_URI:append:docent-os = " file://de.pengutronix.rauc.conf"

# Bundles come from docent, which stores the upload on /data and passes RAUC a local path: no
# HTTP client (network) or streaming of bundles from a URL, which a caller of the bus could
# otherwise point anywhere. nocreate: the board checks and installs bundles, it does not make
# them. json: `rauc status --output-format=json` for a technician.
PACKAGECONFIG:docent-os = "service json nocreate"

do_install:append:docent-os() {
    install -m 0644 ${UNPACKDIR}/de.pengutronix.rauc.conf \
        ${D}${datadir}/dbus-1/system.d/de.pengutronix.rauc.conf
}
