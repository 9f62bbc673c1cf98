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
#
# /data/update is docent's: docent could have planted a link at any name in it, or in place of
# the folder itself. So root never reads or writes there: every access goes through as_docent,
# which runs it as docent (tests/it/tidy.rs checks the writes).
# DOCENT_DATA_DIR, DOCENT_USER and DOCENT_CMDLINE are for the tests (tests/it/hostile_lan.rs);
# the unit sets none of them.
set -u
DATA_DIR=${DOCENT_DATA_DIR:-/data}
OWNER=${DOCENT_USER:-docent}
CMDLINE=${DOCENT_CMDLINE:-/proc/cmdline}
P=$DATA_DIR/update/pending.json
O=$DATA_DIR/update/outcome.json
: "${DEADLINE:=180}" "${MAX_FAILURES:=5}"
# as_docent COMMAND...: COMMAND as $OWNER (util-linux's setpriv, in both images; by its path:
# the board's busybox shell runs its own applet of a bare name, whose setpriv has no --reuid).
# Where there is no such user (a development machine) or the caller is not root, as the caller.
as_docent() {
    if [ "$(id -u)" = 0 ] && id "$OWNER" >/dev/null 2>&1; then
        /usr/bin/setpriv --reuid="$(id -u "$OWNER")" --regid="$(id -g "$OWNER")" --init-groups -- "$@"
    else
        "$@"
    fi
}
field() { printf '%s\n' "$pending" | sed -n "s/.*\"$1\" *: *\"\([^\"]*\)\".*/\1/p" | head -n 1; }
number() { printf '%s\n' "$pending" | sed -n "s/.*\"$1\" *: *\([0-9]*\).*/\1/p" | head -n 1; }
# JSON string content: backslashes and quotes escaped, control characters dropped.
esc() { printf '%s' "$1" | tr -d '\000-\037' | sed 's/\\/\\\\/g; s/"/\\"/g'; }
booted=$(sed -n 's/.*rauc\.slot=\([A-Za-z0-9]*\).*/\1/p' "$CMDLINE")
[ -f "$P" ] || exit 0
pending=$(as_docent head -c 65536 "$P") || { echo "update gate: cannot read $P" >&2; exit 0; }
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
# docent's own last words (its error), else what systemd knows of the unit. 300 bytes of them,
# less a character the cut split (a lead byte without all its continuation bytes): docent reads
# the outcome as UTF-8.
C=$(printf '[\200-\277]')
last=$(journalctl _SYSTEMD_UNIT=docent.service -o cat -n 1 --no-pager 2>/dev/null | tail -n 1 |
    head -c 300 | LC_ALL=C sed "s/$(printf '[\300-\377]')\$//; s/$(printf '[\340-\377]')$C\$//; s/$(printf '[\360-\377]')$C$C\$//")
if [ -n "$last" ]; then
    reason="$reason: $last"
else
    reason="$reason ($(systemctl show -p ActiveState -p SubState -p Result --value docent.service | tr '\n' ' '))"
fi
echo "update gate: rolling back $to: $reason"
# docent may have written the outcome itself (its start check failed): keep its reason.
if [ ! -f "$O" ] || [ "$P" -nt "$O" ]; then
    # installed_at names the install (the fleet client matches its deployment on it).
    # Written by docent's user, so the file is docent's (where there is no such user, the
    # caller's); whatever lies at the temporary name is removed first.
    as_docent rm -f "$O.tmp"
    printf '{"result":"rolled_back","from":"%s","to":"%s","reason":"%s","at":%s,"installed_at":%s}\n' \
        "$(esc "$from")" "$(esc "$to")" "$(esc "$reason")" "$(date +%s)" "${installed_at:-0}" |
        as_docent sh -c 'umask 077; cat >"$1"' sh "$O.tmp"
    as_docent chmod 0600 "$O.tmp"
    as_docent sync "$O.tmp"; as_docent mv "$O.tmp" "$O"
fi
as_docent rm -f "$P"; as_docent sync "$DATA_DIR/update"
rauc status mark-bad booted || fw_setenv "BOOT_${booted}_LEFT" 0
systemctl reboot
