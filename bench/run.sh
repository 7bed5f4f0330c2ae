#!/usr/bin/env bash
# Training throughput of the posenc byte LM (burn, Flex CPU backend) with the composed
# reference operations and with the fused kernels, against the identical PyTorch model
# (eager), same machine, same shapes, one invocation: for each scheme the three runs follow
# each other, so a change of load affects them alike. Not part of CI.
#
#   bench/run.sh                 # schemes nope rope t5 alibi deberta, 30 steps each, batch 32 x 128
#   STEPS=50 SCHEMES="rope" bench/run.sh
#   BIN=/path/to/other/posenc bench/run.sh   # another build, not rebuilt
#
# torch is installed from PyPI on first use into target/bench-venv (or set TORCH_PYTHON to a
# python that has it). Prints bytes/s of each (steps after the first), the ratio fused /
# PyTorch, the peak resident memory of each process (GNU time), and the training time of the
# default sweep projected from the fused throughput of every scheme (measured at the end).
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${STEPS:-30}
SCHEMES=${SCHEMES:-"nope rope t5 alibi deberta"}
THREADS=${THREADS:-$(nproc)}
OUT=target/bench
mkdir -p "$OUT"
PY=${TORCH_PYTHON:-target/bench-venv/bin/python}
if ! "$PY" -c "import torch" 2>/dev/null; then
  python3 -m venv target/bench-venv
  target/bench-venv/bin/pip install --quiet torch
  PY=target/bench-venv/bin/python
fi
# BIN=<binary> measures another build (main's, for a before/after comparison) as it is
if [ -z "${BIN:-}" ]; then
  cargo build --quiet --release --features train --bin posenc
  BIN=target/release/posenc
fi
TIME=/usr/bin/time
peak() { sed -n 's/.*Maximum resident set size (kbytes): \([0-9]*\).*/\1/p' "$1"; }
rate() { sed -n 's/.* \([0-9.]*\) tokens\/s).*/\1/p' "$1"; }

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores;" \
  "load average before: $(cut -d' ' -f1-3 /proc/loadavg); $STEPS steps of 32 x 128 bytes"
printf "%-8s %12s %12s %12s %8s %8s %9s %9s %9s\n" scheme reference fused pytorch fused/ref fused/pt \
  ref_MiB fused_MiB pt_MiB
for s in $SCHEMES; do
  for k in reference fused; do
    rm -rf "$OUT/ckpt-$s-$k"
    RAYON_NUM_THREADS=$THREADS $TIME -v "$BIN" train --scheme "$s" --steps "$STEPS" --warmup 5 \
      --kernels "$k" --out "$OUT/ckpt-$s-$k" --log-every 0 --quiet \
      2>"$OUT/posenc-$s-$k.time" >"$OUT/posenc-$s-$k.out"
  done
  $TIME -v "$PY" bench/torch_lm.py --scheme "$s" --steps "$STEPS" --threads "$THREADS" \
    2>"$OUT/torch-$s.time" >"$OUT/torch-$s.json"
  ref=$(rate "$OUT/posenc-$s-reference.out")
  fused=$(rate "$OUT/posenc-$s-fused.out")
  torch=$("$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))['tokens_per_second'])" "$OUT/torch-$s.json")
  read -r r1 r2 < <(python3 -c "print(f'{$fused/$ref:.2f} {$fused/$torch:.2f}')")
  printf "%-8s %12.0f %12.0f %12.0f %8s %8s %9d %9d %9d\n" "$s" "$ref" "$fused" "$torch" "$r1" "$r2" \
    $(( $(peak "$OUT/posenc-$s-reference.time") / 1024 )) $(( $(peak "$OUT/posenc-$s-fused.time") / 1024 )) \
    $(( $(peak "$OUT/torch-$s.time") / 1024 ))
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
# Every scheme on the fused path alone (no PyTorch peer for most of them), for the projection.
ALL_SCHEMES=${ALL_SCHEMES:-"nope sinusoidal learned shaw xl t5 deberta tupe rope alibi xpos kerple fire dpb partial_rope p_rope rope_nope random_rope dd_alibi cope"}
echo "fused bytes/s of every scheme ($STEPS steps each):"
all_rates=""
for s in $ALL_SCHEMES; do
  rm -rf "$OUT/ckpt-all-$s"
  RAYON_NUM_THREADS=$THREADS "$BIN" train --scheme "$s" --steps "$STEPS" --warmup 5 \
    --out "$OUT/ckpt-all-$s" --log-every 0 --quiet >"$OUT/posenc-all-$s.out" 2>&1
  r=$(rate "$OUT/posenc-all-$s.out")
  printf "  %-11s %8.0f\n" "$s" "$r"
  all_rates="$all_rates $s=$r"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
# The default sweep's training, item by item as `posenc sweep --plan` lists it (from-scratch
# models, fine-tunes and controls), each item at its scheme's measured fused rate.
"$BIN" sweep --plan >"$OUT/sweep-plan.txt"
python3 - "$OUT/sweep-plan.txt" $all_rates <<'EOF'
import sys
rates = {k: float(v) for k, v in (a.split("=") for a in sys.argv[2:])}
# schemes left out of ALL_SCHEMES count at the mean rate of those measured
mean = sum(rates.values()) / len(rates)
total = seconds = 0.0
for line in open(sys.argv[1]).read().splitlines()[1:]:
    cols = line.split()
    if not cols or cols[0] == "total:":
        continue
    # `rope-ft-yarn-x4/seed0`, `nope-budget-x2/seed1`, `rope/yarn/seed2`: the scheme comes first
    scheme = cols[0].split("/")[0].split("-")[0]
    mb = float(cols[-3])
    total += mb
    seconds += mb * 1e6 / rates.get(scheme, mean)
print(f"default sweep: {total:.1f} MB of training bytes; at each scheme's fused rate above"
      f" {seconds / 60:.1f} min of training on one job (evaluation not included)")
EOF
