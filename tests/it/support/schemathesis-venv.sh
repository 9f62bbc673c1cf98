#!/usr/bin/env bash
# Makes sure schemathesis (pinned, with its whole dependency set) is installed in a cached venv
# (${XDG_CACHE_HOME:-~/.cache}/docent-venv, or $DOCENT_VENV) and prints the path of its
# `schemathesis` program. The first run installs from PyPI; later runs are offline and quiet.
# Used by tests/it/openapi.rs.
set -euo pipefail

# To move on: install schemathesis==NEW into a fresh venv, copy its `pip freeze` here.
PINS=(
  schemathesis==4.32.5 anyio==4.16.0 certifi==2026.10.18 charset-normalizer==3.5.2 click==8.5.1
  graphql-core==3.3.2 harfile==0.6.0 hypothesis==6.170.15 hypothesis-graphql==0.13.5 idna==3.20
  iniconfig==2.3.1 jsonschema_rs==0.60.3 markdown-it-py==4.3.0 MarkupSafe==3.0.4 mdurl==0.1.2
  packaging==26.3 pluggy==1.7.0 Pygments==2.21.0 pyrate-limiter==4.5.1 pytest==9.2.0
  PyYAML==6.0.3 requests==2.34.2 rich==15.0.0 sortedcontainers==2.4.0 typing_extensions==4.16.0
  urllib3==2.8.0 Werkzeug==3.1.9
)
VENV=${DOCENT_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/docent-venv}
STAMP=$VENV/.docent-schemathesis-pins
WANT=$(printf '%s\n' "${PINS[@]}")

if [ -x "$VENV/bin/schemathesis" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$WANT" ] \
   && "$VENV/bin/python" -c '' 2>/dev/null; then
  echo "$VENV/bin/schemathesis"
  exit 0
fi
echo "installing ${PINS[0]} into $VENV" >&2
mkdir -p "$(dirname "$VENV")"
LOG=$(mktemp)
trap 'rm -f "$LOG"' EXIT
# The venv may hold other tools: create it only when missing, then install the pins into it.
if ! "$VENV/bin/python" -c '' 2>/dev/null; then
  rm -rf "$VENV"
  python3 -m venv "$VENV" >"$LOG" 2>&1 \
    || { cat "$LOG" >&2; echo "python3 -m venv failed (Debian: apt-get install python3-venv)" >&2; exit 1; }
fi
"$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-input "${PINS[@]}" >"$LOG" 2>&1 \
  || { cat "$LOG" >&2; echo "pip install ${PINS[*]} failed" >&2; exit 1; }
# Written last: an interrupted install is redone on the next run.
printf '%s\n' "$WANT" >"$STAMP"
echo "$VENV/bin/schemathesis"
