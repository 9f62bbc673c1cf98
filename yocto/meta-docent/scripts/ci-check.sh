#!/usr/bin/env bash
# CI checks of the meta-docent layer (run by `./x test`; needs python3 with venv, and for 4. the
# HOSTTOOLS of oe-core's sanity check, which ./x installs):
#   1. oelint-adv over every .bb, .bbappend, .inc and conf/*.conf of the layer, at its default
#      rule set (no config file read): any finding, even "info", fails;
#   2. recipes-kiosk/docent/docent-crates.inc matches the project's Cargo.lock
#      (generate-crates-inc.py --check), and that check is shown to fail when Cargo.lock changes;
#   3. the layer's wic kickstart is the board layout (generate-wks.py --check), and the update
#      bundle's compatibles and the root image's size match the boards' system.conf and the
#      slots (check-update-config.py, shown to fail when they differ);
#   4. real bitbake accepts the layer: `bitbake -g docent-image docent-bundle` for qemuarm64 and
#      raspberrypi4-64, offline, at the layers' pinned commits, and every board/ file the
#      recipes install from the project's tree exists (bitbake-check.sh, bitbake-values.py).
# oelint-adv is installed from PyPI once, pinned, into a cached venv
# (${XDG_CACHE_HOME:-~/.cache}/docent-oelint/venv, or $DOCENT_OELINT_VENV); later runs are offline.
#   yocto/meta-docent/scripts/ci-check.sh
set -euo pipefail

START=$(date +%s.%N)
SCRIPTS=$(cd "$(dirname "$0")" && pwd)
LAYER=$(dirname "$SCRIPTS")
ROOT=$(cd "$LAYER/../.." && pwd)
INC=$LAYER/recipes-kiosk/docent/docent-crates.inc

# The whole set, pinned: the parser and its data decide the findings as much as oelint-adv does.
# To move on: install oelint-adv==NEW into a fresh venv, copy its `pip freeze` here, fix findings.
OELINT_PINS=(
  oelint-adv==9.11.2 oelint-parser==8.13.2 oelint-data==1.5.26
  anytree==2.13.0 argcomplete==3.7.2 colorama==0.4.6 Deprecated==1.3.1 regex==2026.9.29
  urllib3==2.8.0 wrapt==2.5.2
)
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/docent-oelint
VENV=${DOCENT_OELINT_VENV:-$CACHE/venv}

say() { echo "ci-check: $*"; }
die() { echo "ci-check: FAIL: $*" >&2; exit 1; }

command -v python3 >/dev/null || die "python3 missing (Debian: apt-get install python3 python3-venv)"
# The interpreter itself, once: a version manager's shim (pyenv) costs ~0.5 s a call.
PY=$(python3 -c 'import sys; print(sys.executable)')

# --- 1. oelint-adv ------------------------------------------------------------------------
oelint_venv() {
  local stamp=$VENV/.docent-pins want
  want=$(printf '%s\n' "${OELINT_PINS[@]}")
  if [ -x "$VENV/bin/oelint-adv" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ] \
     && "$VENV/bin/python" -c '' 2>/dev/null; then
    return 0
  fi
  say "installing ${OELINT_PINS[0]} into $VENV"
  mkdir -p "$(dirname "$VENV")"
  local log
  log=$(mktemp)
  rm -rf "$VENV"
  if ! "$PY" -m venv "$VENV" >"$log" 2>&1; then
    cat "$log" >&2; rm -f "$log"
    die "python3 -m venv failed (Debian: apt-get install python3-venv)"
  fi
  if ! "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-input \
       "${OELINT_PINS[@]}" >"$log" 2>&1; then
    cat "$log" >&2; rm -f "$log"
    die "pip install ${OELINT_PINS[*]} failed"
  fi
  rm -f "$log"
  # Written last: an interrupted install is redone on the next run.
  printf '%s\n' "$want" >"$stamp"
}

lint_layer() {
  local files=() release
  # Lint against the release the layer declares (the last of LAYERSERIES_COMPAT).
  release=$(sed -n 's/^LAYERSERIES_COMPAT_meta-docent = "\(.*\)"/\1/p' "$LAYER/conf/layer.conf")
  release=${release##* }
  [ -n "$release" ] || die "no LAYERSERIES_COMPAT_meta-docent in conf/layer.conf"
  mapfile -t files < <(cd "$LAYER" && find . -path ./scripts -prune -o -type f \
    \( -name '*.bb' -o -name '*.bbappend' -o -name '*.inc' -o -path './conf/*.conf' \) -print \
    | sed 's|^\./||' | sort)
  [ ${#files[@]} -gt 0 ] || die "no recipes found under $LAYER"
  # OELINT_SKIP_CONFIG: no .oelint.cfg (here or in $HOME) may change the default rule set.
  if ! (cd "$LAYER" && env -u OELINT_CONFIG -u OELINT_MISSPELL_CONFIDENCE OELINT_SKIP_CONFIG=1 \
        "$VENV/bin/oelint-adv" --quiet --relpaths --release "$release" "${files[@]}"); then
    die "oelint-adv findings in the layer (above)"
  fi
  say "oelint-adv ${OELINT_PINS[0]#*==} (release $release): ${#files[@]} files, no findings"
}

# --- 2. the crates include ----------------------------------------------------------------
GEN=$SCRIPTS/generate-crates-inc.py
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

crates_current() {
  local out
  if ! out=$("$PY" "$GEN" "$ROOT" --check 2>&1); then
    echo "$out" >&2
    die "docent-crates.inc does not match Cargo.lock"
  fi
  say "docent-crates.inc matches Cargo.lock ($(grep -c '^SRC_URI\[' "$INC") crates)"
}

# Edits a copy of Cargo.lock: bump (the version of the first crates.io package), checksum (its
# checksum) or add (a new crates.io package). Prints the line the --check diff must add, a tab,
# and what was changed.
mutate_lock() {
  "$PY" - "$1" "$2" <<'PY'
import re, sys
path, mode = sys.argv[1], sys.argv[2]
text = open(path, encoding="utf-8").read()
pkg = re.compile(r'\[\[package\]\]\nname = "([^"]+)"\nversion = "(\d+)\.(\d+)\.(\d+)"\n'
                 r'source = "registry\+https://github.com/rust-lang/crates.io-index"\n'
                 r'checksum = "([0-9a-f]{64})"\n')
m = pkg.search(text)
if not m:
    sys.exit("no crates.io package with a plain x.y.z version in " + path)
name, major, minor, patch, checksum = m.groups()
if mode == "bump":
    new = f"{major}.{minor}.{int(patch) + 1}"
    block = m.group(0).replace(f'version = "{major}.{minor}.{patch}"', f'version = "{new}"')
    expect = f"crate://crates.io/{name}/{new}"
    what = f"{name} {major}.{minor}.{patch} -> {new}"
elif mode == "checksum":
    new = ("0" if checksum[0] != "0" else "1") + checksum[1:]
    block = m.group(0).replace(checksum, new)
    expect = f'SRC_URI[{name}-{major}.{minor}.{patch}.sha256sum] = "{new}"'
    what = f"{name} {major}.{minor}.{patch} checksum {checksum[:8]}... -> {new[:8]}..."
elif mode == "add":
    block = m.group(0)
    text += ('\n[[package]]\nname = "zz-ci-added"\nversion = "1.0.0"\n'
             'source = "registry+https://github.com/rust-lang/crates.io-index"\n'
             'checksum = "' + "ab" * 32 + '"\n')
    expect = "crate://crates.io/zz-ci-added/1.0.0"
    what = "package zz-ci-added 1.0.0 added"
else:
    sys.exit("unknown mode " + mode)
text = text[:m.start()] + block + text[m.end():]
open(path, "w", encoding="utf-8").write(text)
print(f"{expect}\t{what}")
PY
}

# The check must pass on an unmodified copy of Cargo.lock and fail, naming the change and how to
# regenerate, on a changed one (the committed docent-crates.inc is only read: --check writes
# nothing).
crates_check_fails_on_change() {
  local change dir rc expect what
  mkdir -p "$TMP/same"
  cp "$ROOT/Cargo.lock" "$TMP/same/Cargo.lock"
  "$PY" "$GEN" "$TMP/same" --check >"$TMP/out" 2>"$TMP/err" \
    || { cat "$TMP/out" "$TMP/err" >&2; die "crates check fails on an unmodified copy of Cargo.lock"; }
  echo "PASS crates check: an unmodified copy of Cargo.lock passes"
  for change in bump checksum add; do
    dir=$TMP/$change
    mkdir -p "$dir"
    cp "$ROOT/Cargo.lock" "$dir/Cargo.lock"
    expect='' what=''
    IFS=$'\t' read -r expect what < <(mutate_lock "$dir/Cargo.lock" "$change") || true
    [ -n "$what" ] || die "crates check ($change): could not edit the copy of Cargo.lock"
    rc=0
    "$PY" "$GEN" "$dir" --check >"$TMP/out" 2>"$TMP/err" || rc=$?
    [ "$rc" = 1 ] || die "crates check ($change): exit $rc after Cargo.lock changed, expected 1"
    grep -q "docent-crates.inc is stale: regenerate it with python3 .*generate-crates-inc.py" "$TMP/err" \
      || { cat "$TMP/err" >&2; die "crates check ($change): no 'is stale: regenerate it' message"; }
    awk -v e="$expect" 'substr($0, 1, 1) == "+" && index($0, e) { found = 1 } END { exit !found }' \
        "$TMP/out" \
      || { cat "$TMP/out" >&2; die "crates check ($change): the diff does not show $expect"; }
    echo "PASS crates check: Cargo.lock changed ($what) fails with exit 1 and \"is stale\""
  done
}

oelint_venv
lint_layer
crates_current
crates_check_fails_on_change
# --- 3. board files -----------------------------------------------------------------------
# (The recipes install board/ files from the project's tree, not copies: bitbake-values.py, in
# 4., checks that every one they name exists.)
"$PY" "$SCRIPTS/generate-wks.py" "$ROOT" --check || die "files/wic/docent.wks is not board/layout/partitions (above)"
say "files/wic/docent.wks is board/layout/partitions"
update_config_check() {
  local t=$TMP/update
  "$PY" "$SCRIPTS/check-update-config.py" "$ROOT" || die "update settings differ from board/ (above)"
  # On a copy: a bundle compatible that is not the board's, and a slot of another size, fail.
  mkdir -p "$t/board/qemuarm64" "$t/board/raspberrypi4-64" "$t/board/layout" \
    "$t/layer/recipes-core/bundles" "$t/layer/recipes-core/images"
  for f in qemuarm64/rauc-system.conf raspberrypi4-64/rauc-system.conf layout/partitions; do
    cp "$ROOT/board/$f" "$t/board/$f"
  done
  cp "$LAYER/recipes-core/bundles/docent-bundle.bb" "$t/layer/recipes-core/bundles/"
  cp "$LAYER/recipes-core/images/docent-image.bb" "$t/layer/recipes-core/images/"
  "$PY" "$SCRIPTS/check-update-config.py" "$t" "$t/layer" >/dev/null \
    || die "check-update-config.py fails on an unmodified copy"
  sed -i 's/^compatible=.*/compatible=docent-other-board/' "$t/board/raspberrypi4-64/rauc-system.conf"
  "$PY" "$SCRIPTS/check-update-config.py" "$t" "$t/layer" 2>"$TMP/err" >/dev/null \
    && die "check-update-config.py passed a bundle compatible that is not the board's"
  grep -q "RAUC_BUNDLE_COMPATIBLE:raspberrypi4-64 is 'docent-rpi4', but .* says compatible=docent-other-board" \
    "$TMP/err" || { cat "$TMP/err" >&2; die "check-update-config.py: no message naming the compatible"; }
  echo "PASS update config check: a board compatible the bundle does not carry fails"
  cp "$ROOT/board/raspberrypi4-64/rauc-system.conf" "$t/board/raspberrypi4-64/rauc-system.conf"
  awk '$2 == "rootA" || $2 == "rootB" { $4 = 768 } { print }' "$ROOT/board/layout/partitions" \
    >"$t/board/layout/partitions"
  "$PY" "$SCRIPTS/check-update-config.py" "$t" "$t/layer" 2>"$TMP/err" >/dev/null \
    && die "check-update-config.py passed root slots of another size"
  grep -q "IMAGE_ROOTFS_MAXSIZE is '[0-9]*', but a root slot in board/layout/partitions is 786432 KiB" \
    "$TMP/err" || { cat "$TMP/err" >&2; die "check-update-config.py: no message naming the slot size"; }
  echo "PASS update config check: root slots of another size fail"
}
update_config_check
# --- 4. bitbake ---------------------------------------------------------------------------
"$SCRIPTS/bitbake-check.sh" "$ROOT" || die "bitbake refuses the layer (above)"
say "layer checks passed in $(awk -v s="$START" -v e="$(date +%s.%N)" 'BEGIN{printf "%.1f s", e-s}')"
