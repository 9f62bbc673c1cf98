#!/usr/bin/env bash
# Coverage-guided fuzzing with AFL++ through cargo-afl (docs/fuzzing.md).
#   tests/fuzz/run.sh TARGET SECONDS    build, then fuzz TARGET for SECONDS
#   tests/fuzz/run.sh all SECONDS       build, then every target for SECONDS each
# Fails when a target crashes (a panic, an overflow, an abort) or hangs on an input; the
# inputs are left in tests/fuzz/target/afl/TARGET/default/{crashes,hangs}. Prints the
# figures of each run (executions, executions per second, edges, corpus size).
set -euo pipefail
cd "$(dirname "$0")"
export PATH="$HOME/.cache/docent-fuzz/bin:$PATH"
TARGETS=(extract clip image config site ws grpc http)
# The dictionary of tokens each target's format is made of (dict/NAME.dict).
declare -A DICT=([extract]=extract [clip]=clip [config]=config [site]=json [ws]=json [http]=json)
# Build scripts and proc macros stay uninstrumented when the target is named.
TRIPLE=$(rustc -vV | sed -n 's/^host: //p')

[ $# -eq 2 ] || { sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
which=$1 seconds=$2
if [ "$which" = all ]; then
  chosen=("${TARGETS[@]}")
else
  [[ " ${TARGETS[*]} " == *" $which "* ]] || { echo "run.sh: no target $which (${TARGETS[*]})" >&2; exit 2; }
  chosen=("$which")
fi

command -v cargo-afl >/dev/null || { echo "run.sh: cargo-afl is missing (./x fuzz installs it)" >&2; exit 1; }
# Optimisation 1: a build of everything instrumented in a few minutes; the parsers still run
# at tens of thousands of inputs per second.
# The instrumented build is kept outside the clone (like cargo's own registry cache), so that
# CI on the same machine builds only what changed; a fresh machine builds it all once.
BUILD=${DOCENT_FUZZ_BUILD_DIR:-$HOME/.cache/docent-fuzz/target}
AFL_OPT_LEVEL=${AFL_OPT_LEVEL:-1} CARGO_TARGET_DIR=$BUILD \
  cargo afl build --release --locked --quiet --target "$TRIPLE"

# Fuzzes target $1 for $seconds; prints its figures, and fails when it found a crash or a hang.
fuzz_one() {
  local t=$1 out=target/afl/$1 dict=()
  rm -rf "$out"
  mkdir -p "$out"
  [ -n "${DICT[$t]:-}" ] && dict=(-x "dict/${DICT[$t]}.dict")
  # No UI, no CPU pinning on a shared machine, no core-dump setup needed, -V: stop after
  # SECONDS. The time limit per input is generous: the http target opens a kiosk per 1000.
  AFL_NO_UI=1 AFL_NO_AFFINITY=1 AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 \
    AFL_QUIET=1 cargo afl fuzz -V "$seconds" -t 5000 -i "corpus/$t" -o "$out" "${dict[@]}" \
    -- "$BUILD/$TRIPLE/release/$t" >"$out/log" 2>&1 || {
      echo "run.sh: afl-fuzz failed on $t:" >&2; tail -20 "$out/log" >&2; return 1; }
  local stats=$out/default/fuzzer_stats crashes
  get() { sed -n "s/^$1 *: //p" "$stats"; }
  crashes=$(find "$out/default/crashes" "$out/default/hangs" -type f ! -name README.txt | wc -l)
  printf 'fuzz %-8s %5ss  execs %10s  execs/s %8s  edges %6s  corpus %5s  crashes %s  hangs %s\n' \
    "$t" "$(get run_time)" "$(get execs_done)" "$(get execs_per_sec)" "$(get edges_found)" \
    "$(get corpus_count)" "$(get saved_crashes)" "$(get saved_hangs)"
  if [ "$crashes" -gt 0 ]; then
    echo "run.sh: $t failed on these inputs (replay: $BUILD/$TRIPLE/release/$t < FILE):" >&2
    find "$out/default/crashes" "$out/default/hangs" -type f ! -name README.txt >&2
    return 1
  fi
}

# As many targets at once as there are cores (each fuzzer is one process), so CI's short run
# takes seconds x targets / cores; each target's figures print when it ends.
jobs=$(nproc)
failed=()
declare -A running=()
wait_one() {
  local pid
  wait -n -p pid "${!running[@]}" || failed+=("${running[$pid]}")
  unset "running[$pid]"
}
for t in "${chosen[@]}"; do
  [ ${#running[@]} -lt "$jobs" ] || wait_one
  fuzz_one "$t" & running[$!]=$t
done
while [ ${#running[@]} -gt 0 ]; do wait_one; done
[ ${#failed[@]} -eq 0 ] || { echo "run.sh: failing targets: ${failed[*]}" >&2; exit 1; }
