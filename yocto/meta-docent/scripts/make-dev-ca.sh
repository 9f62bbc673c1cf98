#!/bin/sh
# Makes a development CA for docent's updates in DIR (default: ./docent-dev-keys, the default
# DOCENT_RAUC_KEY_DIR of a build directory; run it from there):
#   ca.cert.pem       the keyring: the image trusts bundles whose signer chains to it
#                     (installed as /etc/rauc/keyring.pem by rauc-conf)
#   ca.key.pem        the CA's key (only needed to issue another signing certificate)
#   signing.cert.pem  the signing certificate, issued by the CA, and its key: docent-bundle
#   signing.key.pem   signs with them
#   DEVELOPMENT-CA    a marker: a build that puts this CA into an image warns
# Development only: a museum signs with its own keys (meta-docent README, "Updates"). Nothing is
# overwritten: an existing CA in DIR is left as it is (images may trust it already).
#   yocto/meta-docent/scripts/make-dev-ca.sh [DIR]
set -eu
DIR=${1:-docent-dev-keys}
if [ -e "$DIR/ca.cert.pem" ]; then
    echo "make-dev-ca: $DIR/ca.cert.pem exists: left as it is" >&2
    exit 0
fi
command -v openssl >/dev/null || { echo "make-dev-ca: openssl missing" >&2; exit 1; }
mkdir -p "$DIR"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# The CA may issue certificates, nothing else. The signer may sign, is no CA, and has no
# extended key usage (RAUC's default check purpose accepts a signer without one).
cat >"$TMP/openssl.cnf" <<'CNF'
[req]
distinguished_name = dn
prompt = no
[dn]
[ca]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
[signer]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid, issuer
CNF
(
    umask 077
    openssl req -x509 -config "$TMP/openssl.cnf" -extensions ca -days 3650 \
        -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
        -subj "/O=docent development/CN=docent development update CA" \
        -keyout "$DIR/ca.key.pem" -out "$DIR/ca.cert.pem"
    openssl req -new -config "$TMP/openssl.cnf" \
        -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
        -subj "/O=docent development/CN=docent development update signer" \
        -keyout "$DIR/signing.key.pem" -out "$TMP/signing.csr"
    openssl x509 -req -in "$TMP/signing.csr" -days 1825 -CA "$DIR/ca.cert.pem" \
        -CAkey "$DIR/ca.key.pem" -CAcreateserial -CAserial "$TMP/ca.srl" \
        -extfile "$TMP/openssl.cnf" -extensions signer -out "$DIR/signing.cert.pem"
) 2>"$TMP/log" || { cat "$TMP/log" >&2; rm -f "$DIR/ca.cert.pem"; exit 1; }
chmod 0644 "$DIR/ca.cert.pem" "$DIR/signing.cert.pem"
echo "development CA: not for a museum's kiosk (meta-docent README, \"Updates\")" >"$DIR/DEVELOPMENT-CA"
openssl verify -CAfile "$DIR/ca.cert.pem" "$DIR/signing.cert.pem" >/dev/null
echo "make-dev-ca: development CA and signing certificate in $DIR"
