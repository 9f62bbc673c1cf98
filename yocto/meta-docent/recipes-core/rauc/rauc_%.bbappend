# RAUC on the kiosk: the D-Bus service (rauc-service) that docent calls, nothing it does not use.
# Only for the docent distro: with another, meta-rauc's recipe stays as it is.

# Bundles come from docent, which stores the upload on /data and passes RAUC a local path: no
# HTTP client (network) or streaming of bundles from a URL, which a caller of the bus could
# otherwise point anywhere. nocreate: the board checks and installs bundles, it does not make
# them. json: `rauc status --output-format=json` for a technician.
PACKAGECONFIG:docent-os = "service json nocreate"

# RAUC's own bus policy (de.pengutronix.rauc.conf) lets every local user call it, and bus
# policy files are read in no defined order, so no later deny can be relied on: it is not
# installed. docent-rauc.conf (board/rauc/, in rauc-conf) lets root own and call RAUC and the
# docent group call it; everyone else is refused.
do_install:append:docent-os() {
    rm -f ${D}${datadir}/dbus-1/system.d/de.pengutronix.rauc.conf
}
