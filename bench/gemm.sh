#!/usr/bin/env bash
# The gemm crate (as burn-flex 0.22.1 calls it) against torch.mm / torch.bmm on the byte LM's
# exact product shapes (bench/gemm/shapes.txt), and torch's full training step, in one run.
#
#   bench/gemm.sh                       # 3 rounds, 2 threads
#   ROUNDS=5 THREADS=2 bench/gemm.sh
#
# Each round runs the gemm benchmark (AVX2 kernels, as posenc builds burn-flex), the same with
# gemm's AVX-512 kernels (feature x86-v4), and torch, one after the other; every figure is the
# best over all rounds and repeats (other work on the machine only ever slows a measurement).
# Then torch's whole training step (bench/torch_lm.py, rope and nope, 20 steps). Prints
# markdown tables: GFLOP/s per shape, product milliseconds per step, the ceiling they imply.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-2}
REPEATS=${REPEATS:-5}
MIN_MS=${MIN_MS:-15}
STEP_SCHEMES=${STEP_SCHEMES:-"nope rope"}
PY=${TORCH_PYTHON:-target/bench-venv/bin/python}
OUT=target/bench-gemm/results
rm -rf "$OUT"
LOAD_BEFORE=$(uptime | sed 's/.*load average: //')
mkdir -p "$OUT"
for v in v3 v4; do
  feat=(); [ "$v" = v4 ] && feat=(--features x86-v4)
  CARGO_TARGET_DIR=target/bench-gemm/$v nice -n 10 cargo build --quiet --release \
    --manifest-path bench/gemm/Cargo.toml "${feat[@]}"
done
SHAPES=bench/gemm/shapes.txt
ARGS=(--threads "$THREADS" --repeats "$REPEATS" --min-ms "$MIN_MS")
for r in $(seq 1 "$ROUNDS"); do
  target/bench-gemm/v3/release/posenc-gemm-bench "$SHAPES" "${ARGS[@]}" >"$OUT/gemm-v3-$r.jsonl"
  target/bench-gemm/v4/release/posenc-gemm-bench "$SHAPES" "${ARGS[@]}" >"$OUT/gemm-v4-$r.jsonl"
  "$PY" -W ignore bench/gemm_torch.py "$SHAPES" "${ARGS[@]}" >"$OUT/torch-$r.jsonl" 2>/dev/null
done
for s in $STEP_SCHEMES; do
  for r in 1 2; do
    "$PY" -W ignore bench/torch_lm.py --scheme "$s" --steps 20 --threads "$THREADS" \
      >"$OUT/torch-step-$s-$r.json" 2>/dev/null
  done
done
echo "<!-- $(date -u '+%Y-%m-%d %H:%M UTC'); $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores; load average before: $LOAD_BEFORE, after: $(uptime | sed 's/.*load average: //'); rounds $ROUNDS, repeats $REPEATS, min $MIN_MS ms, threads $THREADS; torch $("$PY" -W ignore -c 'import torch; print(torch.__version__)' 2>/dev/null) -->"
python3 bench/gemm_table.py "$OUT"
