#!/usr/bin/env bash
# bundle.sh --docent BIN [--board qemuarm64|raspberrypi4-64] [--version V]
#           [--key KEY.pem --cert CERT.pem] [--keyring CA.pem] [--docent-toml FILE] [--out DIR]
#   -> DIR/<compatible>-<version>.raucb, e.g. docent-qemu-aarch64-0.2.0.raucb (DIR: target/bundle by
#      default, from ./x bundle; <compatible>: the board's RAUC compatible, below)
# An update of a docent board: a RAUC bundle (format verity) whose one image is the slot's root
# file system, the same tree mkdisk.sh puts in both slots (rootfs.sh, here with VERSION_ID=V in
# /etc/os-release), as an ext4 image sized to its content; RAUC writes it into the slot that is
# not running (rootA or rootB, board/<board>/rauc-system.conf) and switches the boot state to it.
# The manifest names the board's compatible (its rauc-system.conf: docent-qemu-aarch64,
# docent-rpi4, the names kiosks in the field carry; a board refuses another board's bundle) and
# the version. The bundle is signed with KEY/CERT (default: the test CA's signing key under
# $DOCENT_SIM_HOME/rauc-ca, made if missing, see rootfs.sh); the signature must chain to the
# keyring in the image (--keyring: the CA the images were built with, checked here too).
# --docent-toml: the kiosk's configuration in the new root (default: the board's profile).
# A museum signs with its own key: README.md, "Updates".
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/rootfs.sh"
KEY=""; CERT=""; OUT=$(cd "$BOARD/.." && pwd)/target/bundle
while [ $# -gt 0 ]; do
  case "$1" in
    --key) KEY=$2 ;;
    --cert) CERT=$2 ;;
    --docent-toml) DOCENT_TOML=$2 ;;
    --out) OUT=$2 ;;
    *) root_option "$@" || die "unknown option $1" ;;
  esac
  shift 2
done
if [ -z "$KEY$CERT" ]; then
  test_ca
  KEY=$TEST_CA/signing.key.pem; CERT=$TEST_CA/signing.cert.pem
  [ -n "$KEYRING" ] || KEYRING=$TEST_CA/ca.cert.pem
fi
[ -f "$KEY" ] && [ -f "$CERT" ] || die "--key KEY.pem --cert CERT.pem: the signing key and its certificate"
[ -n "$KEYRING" ] || die "--keyring CA.pem: the CA the board's image trusts (its /etc/rauc/keyring.pem)"
command -v rauc >/dev/null || die "no rauc on this machine (./x setup installs it)"
command -v mksquashfs >/dev/null || die "no mksquashfs on this machine (squashfs-tools; ./x setup installs it)"
root_setup
W=$SIM_HOME/work/bundle-$NAME; rm -rf "$W"; mkdir -p "$W/content"
start=$SECONDS
root_tree "$W/root"
# ext4 sized to the content: its blocks, an inode per file, a small journal, 10 % slack.
kib=$(du -sk "$W/root" | cut -f1); files=$(find "$W/root" | wc -l)
size=$(( kib * 11 / 10 + files / 4 + 8192 ))
mke2fs -q -t ext4 -L root -J size=4 -N $(( files * 11 / 10 + 1024 )) -d "$W/root" \
  "$W/content/rootfs.ext4" "${size}k" >/dev/null 2>&1 || die "mke2fs: the root's image (${size} KiB)"
compatible=$(sed -n 's/^compatible=//p' "$BOARD/$NAME/rauc-system.conf")
cat > "$W/content/manifest.raucm" <<EOF2
[update]
compatible=$compatible
version=$VERSION
description=docent kiosk $VERSION
build=$(date -u +%Y%m%d%H%M%S)

[bundle]
format=verity

[image.rootfs]
filename=rootfs.ext4
EOF2
mkdir -p "$OUT"
B=$OUT/$compatible-$VERSION.raucb
rm -f "$B"
rauc bundle --cert="$CERT" --key="$KEY" --keyring="$KEYRING" "$W/content" "$B" >/dev/null \
  || die "rauc bundle failed"
log "ok: $B ($(( $(stat -c %s "$B") / 1024 / 1024 )) MiB; root image $(( size / 1024 )) MiB; compatible $compatible, version $VERSION; $((SECONDS - start)) s)"
rm -rf "$W"
