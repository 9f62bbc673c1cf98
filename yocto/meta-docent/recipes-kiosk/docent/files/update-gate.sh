#!/bin/sh
# The update gate's deadline (docent-update-gate.service, installed as
# /usr/libexec/docent/update-gate.sh; runs as root). docent writes /data/update/pending.json
# ({"slot":"B","from":"0.1.0","to":"0.2.0",...}) after RAUC installed a bundle, before the
# reboot. On the next boot docent, once it serves with its store and loops alive, marks the slot
# good and removes the file. When that does not happen within $DEADLINE seconds, or docent.service
# has failed $MAX_FAILURES times (docent does not start, e.g. it refuses its configuration), this
# script rolls back: /data/update/outcome.json says why (docent's console and health show it on
# the previous slot), RAUC marks the booted slot bad, and the board reboots into the other slot.
# A pending.json naming the other slot (U-Boot fell back on its own) is docent's to report.
set -u
P=/data/update/pending.json
O=/data/update/outcome.json
: "${DEADLINE:=180}" "${MAX_FAILURES:=5}"
field() { sed -n "s/.*\"$1\" *: *\"\([^\"]*\)\".*/\1/p" "$P" | head -n 1; }
number() { sed -n "s/.*\"$1\" *: *\([0-9]*\).*/\1/p" "$P" | head -n 1; }
# JSON string content: backslashes and quotes escaped, control characters dropped.
esc() { printf '%s' "$1" | tr -d '\000-\037' | sed 's/\\/\\\\/g; s/"/\\"/g'; }
booted=$(sed -n 's/.*rauc\.slot=\([A-Za-z0-9]*\).*/\1/p' /proc/cmdline)
[ -f "$P" ] || exit 0
slot=$(field slot)
if [ -z "$booted" ] || [ "$slot" != "$booted" ]; then
    echo "update gate: the pending update is for slot ${slot:-?}, slot ${booted:-?} booted: nothing to do"
    exit 0
fi
from=$(field from); to=$(field to); installed_at=$(number installed_at)
echo "update gate: $from -> $to on slot $booted; docent has $DEADLINE s to take it"
start=$(cut -d. -f1 /proc/uptime)
reason=""
while [ -f "$P" ]; do
    failures=$(systemctl show -p NRestarts --value docent.service)
    if [ "${failures:-0}" -ge "$MAX_FAILURES" ]; then
        reason="docent failed to start $failures times"
        break
    fi
    if [ $(($(cut -d. -f1 /proc/uptime) - start)) -ge "$DEADLINE" ]; then
        reason="docent did not come up within $DEADLINE s"
        break
    fi
    sleep 1
done
[ -n "$reason" ] || { echo "update gate: docent took the update"; exit 0; }
# docent's own last words (its error), else what systemd knows of the unit.
last=$(journalctl _SYSTEMD_UNIT=docent.service -o cat -n 1 --no-pager 2>/dev/null | tail -n 1 | cut -c1-300)
if [ -n "$last" ]; then
    reason="$reason: $last"
else
    reason="$reason ($(systemctl show -p ActiveState -p SubState -p Result --value docent.service | tr '\n' ' '))"
fi
echo "update gate: rolling back $to: $reason"
# docent may have written the outcome itself (its start check failed): keep its reason.
if [ ! -f "$O" ] || [ "$P" -nt "$O" ]; then
    # installed_at names the install (the fleet client matches its deployment on it).
    printf '{"result":"rolled_back","from":"%s","to":"%s","reason":"%s","at":%s,"installed_at":%s}\n' \
        "$(esc "$from")" "$(esc "$to")" "$(esc "$reason")" "$(date +%s)" "${installed_at:-0}" > "$O.tmp"
    chown docent:docent "$O.tmp"; chmod 0600 "$O.tmp"
    sync "$O.tmp"; mv "$O.tmp" "$O"
fi
rm -f "$P"; sync /data/update
rauc status mark-bad booted || fw_setenv "BOOT_${booted}_LEFT" 0
systemctl reboot
