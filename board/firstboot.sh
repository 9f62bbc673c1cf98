#!/bin/sh
# First boot of the docent appliance: write a random administrator password to the data
# partition. Run by docent-firstboot.service before docent.service, only while
# /data/admin-password does not exist (ConditionPathExists=!/data/admin-password).
#
# The password is 16 characters from [A-Za-z0-9] read from /dev/urandom. docent reads the first
# line of the file (admin_password_file under [access] in /etc/docent/docent.toml); the file is mode 0600 and
# owned by the user docent runs as.
#
# The data directory is docent's: docent could have planted a link at any name in it (and it can
# delete the password to have this script run again). So root never writes there: every write
# goes through as_docent, which runs it as the user docent runs as (tests/it/tidy.rs checks it).
set -eu

DATA_DIR=${DOCENT_DATA_DIR:-/data}
OWNER=${DOCENT_USER:-docent}
FILE="$DATA_DIR/admin-password"
TMP="$FILE.tmp.$$"

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

# docent runs as its own user (docent.service: User=docent): the file is its alone, made by it.
# Where there is no such user (a development machine), it is the caller's. Whatever lies at the
# temporary name (a link docent planted) is removed first; the password goes through a pipe,
# never onto a command line (which any user can read in /proc).
as_docent rm -f "$TMP"
printf '%s\n' "$PASSWORD" | as_docent sh -c 'umask 077; cat >"$1"' sh "$TMP"
as_docent chmod 0600 "$TMP"
as_docent sync "$TMP" 2>/dev/null || sync
as_docent mv "$TMP" "$FILE"
sync
# Never printed: /dev/console may be the kiosk's public screen, and the journal is a log. The
# person at the board holds the button five seconds on the setup screen to see it (docent shows
# it then, for at most ten minutes); whoever has root on the board can read the file.
echo "docent-firstboot: administrator password written to $FILE (hold the button 5 s on the setup screen to show it)"
