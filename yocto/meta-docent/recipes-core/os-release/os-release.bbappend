# The firmware's minimum version (docs/updates.md, "Versions: forward, and never below the
# minimum"): docent reads DOCENT_MIN_VERSION from the running image's /etc/os-release and
# installs no bundle older than it, forced or not. It is set in the distro (docent-os.conf) or
# in local.conf; empty, the field is left out (oe-core writes only fields with a value) and
# there is no minimum. Quoted like the other fields; docent takes the value either way.
# nooelint: oelint.vars.mispell.unknown - oe-core's os-release recipe
OS_RELEASE_FIELDS:append:docent-os = " DOCENT_MIN_VERSION"
