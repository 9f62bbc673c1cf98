#!/bin/sh
# First boot of the docent appliance: write a random administrator password to the data
# partition. Run by docent-firstboot.service before docent.service, only while
# /data/admin-password does not exist (ConditionPathExists=!/data/admin-password).
#
# The password is 16 characters from [A-Za-z0-9] read from /dev/urandom. docent reads the first
# line of the file (admin_password_file in /etc/docent/docent.toml); the file is mode 0600 and
# owned by the user docent runs as.
set -eu

DATA_DIR=${DOCENT_DATA_DIR:-/data}
OWNER=${DOCENT_USER:-docent}
FILE="$DATA_DIR/admin-password"
TMP="$FILE.tmp.$$"

if [ -e "$FILE" ]; then
    exit 0
fi
# /proc/mounts rather than mountpoint(1), which minimal busybox builds lack.
if ! grep -q " $DATA_DIR " /proc/mounts 2>/dev/null; then
    echo "docent-firstboot: warning: $DATA_DIR is not a mount point; writing anyway" >&2
fi

umask 077
# tr -dc keeps only the alphabet of 4 KiB of random bytes (about 990 characters) and head -c
# takes 16 of them (busybox and coreutils alike). tr reads a bounded input, not /dev/urandom
# itself: else it is still writing when head has taken its 16 and exits, and prints
# "write error: Broken pipe" into the journal of every first boot.
PASSWORD=$(head -c 4096 /dev/urandom | tr -dc 'A-Za-z0-9' | head -c 16)
if [ "${#PASSWORD}" -ne 16 ]; then
    echo "docent-firstboot: could not read 16 random characters" >&2
    exit 1
fi

printf '%s\n' "$PASSWORD" >"$TMP"
chmod 0600 "$TMP"
# docent runs as its own user (docent.service: User=docent): the file is its alone. Where there
# is no such user (a development machine), it stays root's.
if id "$OWNER" >/dev/null 2>&1; then
    chown "$OWNER:$OWNER" "$TMP"
fi
sync "$TMP" 2>/dev/null || sync
mv "$TMP" "$FILE"
sync
# Never printed: /dev/console may be the kiosk's public screen, and the journal is a log. The
# person at the board holds the button five seconds on the setup screen to see it (docent shows
# it then, for at most ten minutes); whoever has root on the board can read the file.
echo "docent-firstboot: administrator password written to $FILE (hold the button 5 s on the setup screen to show it)"
