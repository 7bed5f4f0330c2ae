#!/usr/bin/env bash
# Where a training step's time goes: `posenc train` under `perf record` (cpu-clock samples
# with DWARF call chains, plus context switches), attributed to operations by
# bench/profile_attr.py. Not part of CI; needs perf.
#
#   bench/profile.sh                          # schemes rope t5 alibi, 12 steps each
#   bench/profile.sh rope -- --kernels fused  # extra arguments after -- go to `posenc train`
#   STEPS=20 FREQ=2000 bench/profile.sh nope
#   RENDER_ONLY=1 bench/profile.sh rope      # tables again from the last recording
#
# Uses target/release/posenc as built (cargo build --release --features train --bin posenc;
# BIN=... for another), copied first so that a rebuild during the run cannot change it.
# Steps 2..N-1 are measured (start-up, the first step and the final checkpoint are left out).
# Prints one markdown section per scheme; perf data stays in target/bench-profile/<scheme>.
set -euo pipefail
cd "$(dirname "$0")/.."
schemes=()
extra=()
while [ $# -gt 0 ]; do
  if [ "$1" = "--" ]; then
    shift
    extra=("$@")
    break
  fi
  schemes+=("$1")
  shift
done
[ ${#schemes[@]} -gt 0 ] || schemes=(rope t5 alibi)
STEPS=${STEPS:-12}
FREQ=${FREQ:-1000}
THREADS=${THREADS:-$(nproc)}
BIN=${BIN:-target/release/posenc}
OUT=${OUT:-target/bench-profile}
if [ ! -x "$BIN" ]; then
  echo "profile.sh: no $BIN; build it with: cargo build --release --features train --bin posenc" >&2
  exit 1
fi
mkdir -p "$OUT"
[ -n "${RENDER_ONLY:-}" ] || cp "$BIN" "$OUT/posenc.bin"
# context switches give the rayon workers the main thread's operation; optional
events=(-e cpu-clock)
if perf record -q -e sched:sched_switch -o "$OUT/probe.data" -- true >/dev/null 2>&1; then
  events+=(-e sched:sched_switch)
fi
rm -f "$OUT/probe.data"
echo "<!-- $(date -u '+%Y-%m-%d %H:%M UTC'); $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores; load average $(uptime | sed 's/.*load average: //'); posenc $(git rev-parse --short HEAD 2>/dev/null || echo '?'), binary built $(date -u -r "$BIN" '+%Y-%m-%d %H:%M UTC'); RAYON_NUM_THREADS=$THREADS; $STEPS steps; perf ${events[*]} -F $FREQ --call-graph dwarf,16384 -->"
echo
jsons=()
sections=$(mktemp)
trap 'rm -f "$sections"' EXIT
for s in "${schemes[@]}"; do
  d="$OUT/$s"
  if [ -z "${RENDER_ONLY:-}" ]; then
  rm -rf "$d"
  mkdir -p "$d"
  fi
  cmd=("$OUT/posenc.bin" train --scheme "$s" --steps "$STEPS" --warmup 5 --out "$d/ckpt" \
    --log-every 1 --quiet ${extra[@]+"${extra[@]}"})
  load=$(uptime | sed 's/.*load average: //')
  if [ -z "${RENDER_ONLY:-}" ]; then
    RAYON_NUM_THREADS="$THREADS" perf record -q "${events[@]}" -F "$FREQ" --call-graph dwarf,16384 \
      -m 1024 -o "$d/perf.data" -- "${cmd[@]}" >"$d/train.out" 2>"$d/train.err"
    echo "$load" >"$d/load"
  fi
  load=$(cat "$d/load" 2>/dev/null || echo "$load")
  rate=$(sed -n 's/.* \([0-9.]*\) tokens\/s).*/\1/p' "$d/train.out" "$d/train.err" | tail -1)
  perf script -i "$d/perf.data" -F pid,tid,time,event,period,ip,sym --no-inline 2>"$d/script.err" \
    | python3 bench/profile_attr.py --title "$s${extra[*]:+ ${extra[*]}}" --json "$d/profile.json" >"$d/profile.md"
  jsons+=("$d/profile.json")
  {
  cat "$d/profile.md"
  echo "Command: \`RAYON_NUM_THREADS=$THREADS posenc train --scheme $s --steps $STEPS --warmup 5 --log-every 1 --quiet${extra[*]:+ ${extra[*]}}\`;" \
    "posenc reports ${rate:-?} tokens/s under perf (steps 2..$STEPS); load average at the start $load."
  grep -i "lost" "$d/script.err" | head -2 | sed 's/^/perf: /' || true
  echo
  } >>"$sections"
done
echo "### Summary: CPU milliseconds per training step"
echo
python3 bench/profile_attr.py --combine "${jsons[@]}"
echo
cat "$sections"
