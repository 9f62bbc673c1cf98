#!/usr/bin/env bash
# Real bitbake on the layer: `bitbake -g docent-image docent-bundle` (which parses every recipe
# first) for MACHINE qemuarm64 and raspberrypi4-64, with the layers at the commits pinned in
# yocto/kas/docent.yml, in a fresh build directory, offline (BB_NO_NETWORK). A recipe or
# configuration bitbake refuses, a dependency nothing provides, or a warning or error from
# parsing fails. Nothing past the task graph runs (no source can be fetched here).
#
# The layers come, in this order, from:
#   1. the cache: ${DOCENT_YOCTO_CACHE:-${XDG_CACHE_HOME:-~/.cache}/docent-yocto}/layers/NAME-COMMIT
#   2. snapshots (git archive tarballs) in $DOCENT_YOCTO_SNAPSHOTS, default ROOT/../shared/yocto,
#      used only when the README.md beside them gives the pinned commit for the tarball;
#   3. a git clone of the pinned commit from the URL in docent.yml.
# bitbake refuses to run as root: as root, the check runs as the system user $DOCENT_YOCTO_USER
# (default docent-yocto, created when missing) in a directory of its own under /var/tmp, with
# hard-linked (read-only) copies of the layers. It needs the HOSTTOOLS oe-core's sanity check
# lists (./x installs them) and an en_US.UTF-8 locale (generated into the cache if the system
# has none). Both machines share one bitbake run (multiconfig), so the server starts once.
#
# Every recipe of the layers is parsed, for both machines: bitbake resolves the providers of
# every task of the image (its SDK tasks too), far more than the build graph, so masking the
# recipes outside that graph breaks the resolution. Only meta-raspberrypi (and this layer's
# appends to it) is masked for qemuarm64. The update keys are a development CA made for the run
# (make-dev-ca.sh) in the build directory's docent-dev-keys, the distro's default.
#   yocto/meta-docent/scripts/bitbake-check.sh [PROJECT_ROOT]
set -euo pipefail

START=$SECONDS
SCRIPTS=$(cd "$(dirname "$0")" && pwd)
LAYER=$(dirname "$SCRIPTS")
ROOT=$(cd "${1:-$LAYER/../..}" && pwd)

KAS=$ROOT/yocto/kas/docent.yml
CACHE=${DOCENT_YOCTO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/docent-yocto}
SNAPSHOTS=${DOCENT_YOCTO_SNAPSHOTS:-$ROOT/../shared/yocto}
BB_USER=${DOCENT_YOCTO_USER:-docent-yocto}
# Layers the check needs (bitbake is not a layer but is pinned the same way).
NEEDED=(bitbake openembedded-core meta-yocto meta-raspberrypi meta-rauc)
# The two machines: the first is the build directory's own configuration, the second a
# multiconfig ("mc:pi:"), so the configuration and the server are set up once.
MACHINE_DEFAULT=qemuarm64
MACHINE_MC=raspberrypi4-64

say() { echo "bitbake-check: $*"; }
die() { echo "bitbake-check: FAIL: $*" >&2; exit 1; }
# The interpreter bitbake runs (python3 on its PATH, below), not a version manager's shim.
PY=$(PATH=/usr/local/bin:/usr/bin:/bin command -v python3) || die "python3 missing"

[ -f "$KAS" ] || die "$KAS missing (the pinned layers)"

# name url commit, one line per repository of docent.yml that has a url (kas's format: two
# spaces before a repository's name, four before its keys).
pins() {
  awk '
    /^repos:/ { inrepos = 1; next }
    /^[^ #]/ { inrepos = 0 }
    inrepos && /^  [A-Za-z0-9_.-]+:[ ]*$/ { flush(); name = $1; sub(":", "", name); next }
    inrepos && /^    url:/ { url = $2 }
    inrepos && /^    commit:/ { commit = $2 }
    function flush() { if (name != "" && url != "") print name, url, commit; name = ""; url = ""; commit = "" }
    END { flush() }
  ' "$KAS"
}

# The commit a snapshot tarball was made from, as its folder's README.md table states it
# ("| NAME.tar.xz | branch | commit | ..."; the tarballs themselves do not record it).
snapshot_commit() {
  [ -f "$SNAPSHOTS/README.md" ] || return 0
  awk -F'|' -v t="$1.tar.xz" '{ gsub(/ /, "", $2); gsub(/ /, "", $4) } $2 == t { print $4 }' \
    "$SNAPSHOTS/README.md"
}

# Makes $CACHE/layers/NAME-COMMIT hold the pinned tree; prints where it came from.
fetch_layer() {
  local name=$1 url=$2 commit=$3 dest tmp tarball got
  dest=$CACHE/layers/$name-$commit
  [ -f "$dest/.docent-complete" ] && { echo cache; return 0; }
  mkdir -p "$CACHE/layers"
  rm -rf "$dest"
  tmp=$(mktemp -d "$CACHE/layers/.$name.XXXXXX")
  tarball=$SNAPSHOTS/$name.tar.xz
  if [ -f "$tarball" ]; then
    got=$(snapshot_commit "$name")
    if [ "$got" = "$commit" ] && tar -xJf "$tarball" -C "$tmp" && [ -d "$tmp/$name" ]; then
      mv "$tmp/$name" "$dest"
      rm -rf "$tmp"
      touch "$dest/.docent-complete"
      echo "snapshot $tarball"
      return 0
    fi
    echo "bitbake-check: $tarball is of commit ${got:-unknown} (its README.md), not the pinned $commit: cloning" >&2
  fi
  if git -c advice.detachedHead=false clone -q --no-checkout "$url" "$tmp/$name" >&2 \
     && git -C "$tmp/$name" checkout -q "$commit" >&2; then
    rm -rf "$tmp/$name/.git"
    mv "$tmp/$name" "$dest"
    rm -rf "$tmp"
    touch "$dest/.docent-complete"
    echo "git $url"
    return 0
  fi
  rm -rf "$tmp"
  die "layer $name at $commit: no snapshot $tarball of that commit, and cloning $url failed"
}

declare -A LAYER_DIR
mapfile -t PINS < <(pins)
for n in "${NEEDED[@]}"; do
  found=0
  for p in "${PINS[@]}"; do
    read -r name url commit <<<"$p"
    [ "$name" = "$n" ] || continue
    found=1
    [[ "$commit" =~ ^[0-9a-f]{40}$ ]] || die "$KAS: $name has no 40-hex commit"
    from=$(fetch_layer "$name" "$url" "$commit")
    LAYER_DIR[$name]=$CACHE/layers/$name-$commit
    say "$name ${commit:0:12} ($from)"
  done
  [ "$found" = 1 ] || die "$KAS pins no repository $n"
done

# Python byte code compiled once into the cache (the unprivileged user cannot write it there).
for n in bitbake openembedded-core; do
  d=${LAYER_DIR[$n]}
  if [ ! -f "$d/.docent-pyc" ]; then
    "$PY" -m compileall -q -j 2 "$d/lib" "$d/meta/lib" \
      >/dev/null 2>&1 || true
    touch "$d/.docent-pyc"
  fi
done

# en_US.UTF-8: the system's, or one generated into the cache (LOCPATH, passed to bitbake).
LOCALE_DIR=
if ! locale -a 2>/dev/null | grep -qix 'en_US.utf8'; then
  LOCALE_DIR=$CACHE/locale
  if [ ! -f "$LOCALE_DIR/en_US.UTF-8/LC_CTYPE" ]; then
    mkdir -p "$LOCALE_DIR"
    localedef -i en_US -f UTF-8 "$LOCALE_DIR/en_US.UTF-8" \
      || die "no en_US.UTF-8 locale and localedef could not make one (Debian: apt-get install locales)"
  fi
fi

# The work directory: build directory and (as root) the layers, for the user bitbake runs as.
if [ "$(id -u)" = 0 ]; then
  if ! id "$BB_USER" >/dev/null 2>&1; then
    useradd --system --user-group --home-dir /nonexistent --no-create-home \
      --shell /usr/sbin/nologin "$BB_USER" || die "could not create the user $BB_USER"
  fi
  WORK=$(mktemp -d /var/tmp/docent-yocto.XXXXXX)
  mkdir -p "$WORK/layers"
  for n in "${NEEDED[@]}"; do
    cp -al "${LAYER_DIR[$n]}" "$WORK/layers/$n" 2>/dev/null || cp -a "${LAYER_DIR[$n]}" "$WORK/layers/$n"
    LAYER_DIR[$n]=$WORK/layers/$n
  done
  if [ -n "$LOCALE_DIR" ]; then
    cp -a "$LOCALE_DIR" "$WORK/locale"
    LOCALE_DIR=$WORK/locale
  fi
  RUN=(setpriv --reuid="$BB_USER" --regid="$BB_USER" --init-groups)
else
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/docent-yocto.XXXXXX")
  RUN=()
fi
# The layer under test, copied: the build sees exactly the committed files plus local edits.
cp -a "$LAYER" "$WORK/meta-docent"
rm -rf "$WORK/meta-docent/scripts"
chmod -R a+rX "$WORK/meta-docent"
# The project's board/ files, which the recipes install from the fetched tree (nothing is
# fetched here): bitbake-values.py checks that each one they name exists.
mkdir -p "$WORK/project"
cp -a "$ROOT/board" "$WORK/project/board"
chmod -R a+rX "$WORK/project"
mkdir -p "$WORK/build/conf/multiconfig"
cleanup() {
  [ -n "${KEEP_WORK:-}" ] && { say "work directory kept: $WORK"; return; }
  rm -rf "$WORK"
}
trap cleanup EXIT

lay() { echo "${LAYER_DIR[$1]}"; }

cat >"$WORK/build/conf/bblayers.conf" <<EOF
LCONF_VERSION = "7"
BBPATH = "\${TOPDIR}"
BBFILES ?= ""
BBLAYERS = " \\
  $(lay openembedded-core)/meta \\
  $(lay meta-yocto)/meta-poky \\
  $(lay meta-raspberrypi) \\
  $(lay meta-rauc) \\
  $WORK/meta-docent \\
  "
EOF
cat >"$WORK/build/conf/local.conf" <<EOF
CONF_VERSION = "2"
MACHINE = "$MACHINE_DEFAULT"
DISTRO = "docent-os"
BB_NO_NETWORK = "1"
BB_NUMBER_PARSE_THREADS = "2"
BB_NUMBER_THREADS = "2"
# No hash equivalence server: nothing is built.
BB_HASHSERVE = ""
BB_SIGNATURE_HANDLER = "OEBasicHash"
BBMULTICONFIG = "pi"
# meta-raspberrypi is only for the Pi: not parsed for qemuarm64, nor the appends to it.
BBMASK = "^$(lay meta-raspberrypi)/ ^$WORK/meta-docent/dynamic-layers/raspberrypi/"
BBFILE_PATTERN_IGNORE_EMPTY_raspberrypi = "1"
EOF
cat >"$WORK/build/conf/multiconfig/pi.conf" <<EOF
MACHINE = "$MACHINE_MC"
TMPDIR = "\${TOPDIR}/tmp-pi"
BBMASK = ""
EOF
# The update keys: a development CA where the distro looks by default (TOPDIR/docent-dev-keys).
"$SCRIPTS/make-dev-ca.sh" "$WORK/build/docent-dev-keys" >/dev/null \
  || die "make-dev-ca.sh could not make the development CA"
if [ "$(id -u)" = 0 ]; then
  chown -R "$BB_USER:$BB_USER" "$WORK/build"
  chown "$BB_USER:$BB_USER" "$WORK"
fi

PASS=BB_ENV_PASSTHROUGH_ADDITIONS
ENVV=(HOME="$WORK" LANG=en_US.UTF-8 LC_ALL=en_US.UTF-8 BBPATH="$WORK/build"
  PATH="$(lay bitbake)/bin:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")
if [ -n "$LOCALE_DIR" ]; then ENVV+=(LOCPATH="$LOCALE_DIR" "$PASS=LOCPATH"); fi

LOG=$WORK/bitbake.log
TARGETS=(docent-image docent-bundle)
say "bitbake -g ${TARGETS[*]} for $MACHINE_DEFAULT and $MACHINE_MC (fresh build directory $WORK/build)"
rc=0
(cd "$WORK/build" && "${RUN[@]}" env -i "${ENVV[@]}" \
  bitbake -g "${TARGETS[@]}" "${TARGETS[@]/#/mc:pi:}") >"$LOG" 2>&1 || rc=$?
# Parse summary lines, warnings and errors: the proof of what was checked.
grep -E '^(Parsing of|NOTE: Resolving|WARNING|ERROR|NOTE: Multiconfig|Summary)' "$LOG" | head -60 || true
[ "$rc" = 0 ] || { tail -40 "$LOG" >&2; die "bitbake -g ${TARGETS[*]} exited $rc (log above)"; }
if grep -q '^WARNING' "$LOG"; then
  die "bitbake printed warnings (above): a check of the layer must be clean"
fi
for f in task-depends.dot pn-buildlist; do
  [ -s "$WORK/build/$f" ] || die "bitbake wrote no $f"
done
tasks=$(grep -c '^"[^"]*" \[label=' "$WORK/build/task-depends.dot" || true)
recipes=$(wc -l <"$WORK/build/pn-buildlist")
# In the graph of each machine ("mc:pi:" names the Pi's).
for want in docent espeak-ng pocketsphinx sphinxbase docent-boot u-boot rauc rauc-conf \
    os-release docent-bundle rauc-native squashfs-tools-native; do
  for mc in "" mc:pi:; do
    grep -qx "$mc$want" "$WORK/build/pn-buildlist" \
      || die "$mc$want is not in the task graph of ${TARGETS[*]} (pn-buildlist)"
  done
done
grep -qx "mc:pi:rpi-bootfiles" "$WORK/build/pn-buildlist" \
  || die "mc:pi:rpi-bootfiles is not in the task graph of ${TARGETS[*]} (pn-buildlist)"
# What bitbake makes of the update settings, per machine (bitbake-values.py: the board/ files
# the recipes install from the project's tree exist; the kernel's rauc.cfg, system.conf and the
# bundle's compatible, version, format, RAUC's PACKAGECONFIG; the Pi kernel's docent-boot.cfg;
# the console's busybox getty and shell; grow-data's packages); one tinfoil session on the warm
# parse cache.
cp "$SCRIPTS/bitbake-values.py" "$WORK/bitbake-values.py"
chmod a+r "$WORK/bitbake-values.py"
values() {
  (cd "$WORK/build" && "${RUN[@]}" env -i "${ENVV[@]}" PYTHONPATH="$(lay bitbake)/lib" \
    "$PY" "$WORK/bitbake-values.py" "$WORK/project")
}
values || die "bitbake's values of the update settings (above)"

# The check must be able to fail: in the same build directory (its parse cache warm, so only
# the changed recipes are parsed again), a recipe bitbake cannot parse, then an image package
# nothing provides (what the layer's first bitbake run found for espeak-ng), must each make
# `bitbake -g` exit non-zero with bitbake's own message.
must_fail() {
  local what=$1 expect=$2 file=$3 body=$4 out=$WORK/bitbake-must-fail.log rc=0
  mkdir -p "$(dirname "$file")"
  printf '%s\n' "$body" >"$file"
  chmod a+r "$file"
  (cd "$WORK/build" && "${RUN[@]}" env -i "${ENVV[@]}" bitbake -g docent-image) >"$out" 2>&1 || rc=$?
  rm -f "$file"
  [ "$rc" != 0 ] || { cat "$out" >&2; die "bitbake -g passed with $what"; }
  grep -q "$expect" "$out" || { tail -20 "$out" >&2; die "bitbake -g failed with $what, but without \"$expect\""; }
  echo "PASS bitbake check: $what fails (exit $rc, \"$expect\")"
}
must_fail "a recipe that does not parse" "ParseError" \
  "$WORK/meta-docent/recipes-kiosk/docent-ci/docent-ci-broken_1.0.bb" 'SUMMARY = "unterminated'
must_fail "an image package nothing provides" "Nothing RPROVIDES 'docent-ci-missing'" \
  "$WORK/meta-docent/recipes-core/images/docent-image.bbappend" \
  'IMAGE_INSTALL:append = " docent-ci-missing"'
# The update checks fail too: without the Pi kernel's append (meta-rauc's fragment and the
# layer's docent-boot.cfg), the values check names the kernel and both fragments; without a
# board/ file a recipe installs (one run: the Pi's system.conf gone from the project), it names
# the recipe and the file; without the update keys, bitbake stops before parsing and says how to
# make them.
append=$WORK/meta-docent/dynamic-layers/raspberrypi/recipes-kernel/linux/linux-raspberrypi_%.bbappend
gone=$WORK/project/board/raspberrypi4-64/rauc-system.conf
mv "$append" "$WORK/kernel.bbappend"
mv "$gone" "$WORK/rauc-system.conf.away"
rc=0
values >"$WORK/values-must-fail.log" 2>&1 || rc=$?
mv "$WORK/kernel.bbappend" "$append"
mv "$WORK/rauc-system.conf.away" "$gone"
[ "$rc" != 0 ] || { cat "$WORK/values-must-fail.log" >&2; die "bitbake-values.py passed a Pi kernel without rauc.cfg"; }
for frag in rauc.cfg docent-boot.cfg; do
  grep -q "raspberrypi4-64: linux-raspberrypi does not fetch $frag" "$WORK/values-must-fail.log" \
    || { tail -20 "$WORK/values-must-fail.log" >&2; die "bitbake-values.py failed without naming the Pi kernel's $frag"; }
done
echo "PASS bitbake check: a Pi kernel without meta-rauc's and the layer's fragments fails (exit $rc, \"does not fetch rauc.cfg\", \"does not fetch docent-boot.cfg\")"
grep -q "raspberrypi4-64: rauc-conf installs board/raspberrypi4-64/rauc-system.conf, which the project does not have" \
  "$WORK/values-must-fail.log" \
  || { tail -20 "$WORK/values-must-fail.log" >&2; die "bitbake-values.py failed without naming the missing board/ file"; }
echo "PASS bitbake check: a board/ file a recipe installs, missing from the project, fails (\"rauc-conf installs board/raspberrypi4-64/rauc-system.conf, which the project does not have\")"
mv "$WORK/build/docent-dev-keys" "$WORK/build/docent-dev-keys.away"
rc=0
(cd "$WORK/build" && "${RUN[@]}" env -i "${ENVV[@]}" bitbake -g docent-bundle) >"$WORK/keys-must-fail.log" 2>&1 || rc=$?
mv "$WORK/build/docent-dev-keys.away" "$WORK/build/docent-dev-keys"
[ "$rc" != 0 ] || { cat "$WORK/keys-must-fail.log" >&2; die "bitbake -g passed without the update keys"; }
grep -q "update keys missing: .*/docent-dev-keys/ca.cert.pem.*make-dev-ca.sh" "$WORK/keys-must-fail.log" \
  || { tail -20 "$WORK/keys-must-fail.log" >&2; die "bitbake -g failed without the update keys, but not saying so"; }
echo "PASS bitbake check: missing update keys fail (exit $rc, \"update keys missing ... make-dev-ca.sh\")"

say "passed in $((SECONDS - START)) s: $recipes recipes, $tasks tasks in the graph of both machines"
