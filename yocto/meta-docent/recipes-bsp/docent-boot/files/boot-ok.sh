#!/bin/sh
# The slot U-Boot booted works: give it its attempts back (board/boot/boot.cmd took one).
# Run by docent-boot-ok.service once docent.service serves (READY=1), installed as
# /usr/libexec/docent/boot-ok.sh. Writes the boot state only when it changes.
set -eu
ATTEMPTS=3
slot=$(sed -n 's/.*docent\.slot=\([AB]\).*/\1/p' /proc/cmdline)
if [ -z "$slot" ]; then
    echo "docent-boot-ok: not booted by the A/B boot script (no docent.slot=): nothing to do"
    exit 0
fi
left=$(fw_printenv -n "BOOT_${slot}_LEFT" 2>/dev/null || true)
if [ "$left" != "$ATTEMPTS" ]; then
    fw_setenv "BOOT_${slot}_LEFT" "$ATTEMPTS"
fi
echo "docent-boot-ok: slot $slot is good (it had ${left:-no} attempts left, now $ATTEMPTS)"
