#!/usr/bin/env bash
# Evaluation at long lengths: for every scheme and length, `posenc eval` of the shipped
# checkpoint ($CHECKPOINTS/<scheme>, read only; data/checkpoints by default) on the first
# windows of the validation split, its wall time, time per window and peak resident memory
# (GNU time), for the binary built here ("after") and, when BEFORE names another binary, for
# that one side by side; then each scheme's time per window and peak against NoPE's at the same
# length, and the memory estimate `posenc eval` prints before it starts against the measured
# peak. Not part of CI.
#
#   bench/long.sh                                  # after only, lengths 4096 8192 16384 65536
#   BEFORE=/path/to/old/posenc bench/long.sh       # before and after
#   LENGTHS="4096 8192" SCHEMES="nope t5" WINDOWS=8 bench/long.sh
#   CHECKPOINTS=data/sweep/checkpoints SCHEMES="nope dpb cope" bench/long.sh   # the sweep's seed 0
#
# WINDOWS windows per length (default 8; LONGEST_WINDOWS, default 1, at 65,536 bytes and
# beyond). The BEFORE binary runs only up to BEFORE_MAX_LEN bytes (default 8192): an older
# build with [H, L, L] position tensors would need tens of GB beyond that. Prints a markdown
# table; the raw GNU time reports are kept in target/bench/long/.
set -euo pipefail
cd "$(dirname "$0")/.."
LENGTHS=${LENGTHS:-"4096 8192 16384 65536"}
SCHEMES=${SCHEMES:-"nope sinusoidal learned shaw xl t5 deberta tupe rope alibi xpos kerple fire"}
WINDOWS=${WINDOWS:-8}
CHECKPOINTS=${CHECKPOINTS:-data/checkpoints}
LONGEST_WINDOWS=${LONGEST_WINDOWS:-1}
BEFORE=${BEFORE:-}
BEFORE_MAX_LEN=${BEFORE_MAX_LEN:-8192}
OUT=target/bench/long
mkdir -p "$OUT"
cargo build --quiet --release --features train --bin posenc
AFTER=target/release/posenc
TIME=/usr/bin/time

windows_at() { if [ "$1" -ge 65536 ]; then echo "$LONGEST_WINDOWS"; else echo "$WINDOWS"; fi; }
peak_mib() { sed -n 's/.*Maximum resident set size (kbytes): \([0-9]*\).*/\1/p' "$1" | awk '{printf "%d", $1 / 1024}'; }
wall_s() {
  # "Elapsed (wall clock) time (h:mm:ss or m:ss): 1:02.34"
  sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$1" |
    awk -F: '{ if (NF == 3) print $1 * 3600 + $2 * 60 + $3; else print $1 * 60 + $2 }'
}
estimate_mib() {
  # "eval: length 65536 (1 window a pass) needs about 1.1 GiB of memory, ..."
  sed -n 's/^eval: .*needs about \([0-9.]*\) \([KMG]iB\).*/\1 \2/p' "$1" |
    awk '{ f = ($2 == "GiB") ? 1024 : ($2 == "KiB" ? 1 / 1024 : 1); printf "%d", $1 * f }'
}

# run BINARY SCHEME LENGTH WINDOWS TAG: one evaluation; prints "seconds peak_mib estimate_mib"
run() {
  local bin=$1 s=$2 l=$3 w=$4 tag=$5
  local report="$OUT/$tag-$s-$l.time"
  if ! $TIME -v "$bin" eval --checkpoint "$CHECKPOINTS/$s" --lengths "$l" \
    --max-bytes $((w * l + 1)) --split valid >"$OUT/$tag-$s-$l.csv" 2>"$report"; then
    echo "failed - -"
    return
  fi
  echo "$(wall_s "$report") $(peak_mib "$report") $(estimate_mib "$report")"
}

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores," \
  "$(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo);" \
  "load average before: $(cut -d' ' -f1-3 /proc/loadavg); after: $(git rev-parse --short HEAD)"
echo
echo "| scheme | length | windows | before: time | s/window | peak | after: time | s/window | peak (estimate) | after / NoPE: time per window | peak |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
declare -A nope_rate nope_peak
for l in $LENGTHS; do
  w=$(windows_at "$l")
  for s in $SCHEMES; do
    before="- | - | -"
    if [ -n "$BEFORE" ] && [ "$l" -le "$BEFORE_MAX_LEN" ]; then
      read -r bt bp _ < <(run "$BEFORE" "$s" "$l" "$w" before)
      if [ "$bt" = failed ]; then
        before="failed | - | -"
      else
        before="$(printf '%.1f s | %.2f s | %d MiB' "$bt" "$(echo "$bt / $w" | bc -l)" "$bp")"
      fi
    fi
    read -r at ap ae < <(run "$AFTER" "$s" "$l" "$w" after)
    if [ "$at" = failed ]; then
      echo "| $s | $l | $w | $before | failed | - | - | - | - |"
      continue
    fi
    rate=$(echo "$at / $w" | bc -l)
    if [ "$s" = nope ]; then
      nope_rate[$l]=$rate
      nope_peak[$l]=$ap
    fi
    ratios="- | -"
    if [ -n "${nope_rate[$l]:-}" ]; then
      ratios="$(printf '%.2f | %.2f' "$(echo "$rate / ${nope_rate[$l]}" | bc -l)" "$(echo "$ap / ${nope_peak[$l]}" | bc -l)")"
    fi
    printf '| %s | %d | %d | %s | %.1f s | %.2f s | %d MiB (%s MiB) | %s |\n' \
      "$s" "$l" "$w" "$before" "$at" "$rate" "$ap" "${ae:--}" "$ratios"
  done
done
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
