#!/usr/bin/env bash
# The gemm crate (as burn-flex 0.22.1 calls it) against torch.mm / torch.bmm on the byte LM's
# exact product shapes (bench/gemm/shapes.txt), and torch's full training step, in one run.
#
#   bench/gemm.sh                       # 3 rounds, 2 threads
#   ROUNDS=5 THREADS=2 bench/gemm.sh
#
# Each round runs the gemm benchmark (AVX2 kernels, as posenc builds burn-flex), the same with
# gemm's AVX-512 kernels (feature x86-v4), torch with THREADS threads and with 1, one after the
# other; every figure is the best over all rounds and repeats (other work on the machine only
# ever slows a measurement). Then whole training steps of both sides, alternating
# (target/release/posenc train $POSENC_ARGS, and bench/torch_lm.py's model; STEPS steps, each
# timed alone, twice). Prints markdown tables: GFLOP/s per shape, product milliseconds per
# step, full steps, and the ceiling the products put on the posenc / torch throughput ratio.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x target/release/posenc ] || cargo build --quiet --release --features train --bin posenc
ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-2}
REPEATS=${REPEATS:-5}
MIN_MS=${MIN_MS:-15}
STEP_SCHEMES=${STEP_SCHEMES:-"rope"}
STEPS=${STEPS:-12}
# whole steps on 1 thread as well: far less disturbed by other work than 2 threads
STEP_THREADS=${STEP_THREADS:-"1 $THREADS"}
# posenc as it trains before fused kernels; empty for a binary without --kernels
POSENC_ARGS=${POSENC_ARGS-"--kernels reference"}
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
cp target/release/posenc "$OUT/posenc.bin"  # a rebuild during the run cannot change it
SHAPES=bench/gemm/shapes.txt
ARGS=(--threads "$THREADS" --repeats "$REPEATS" --min-ms "$MIN_MS")
for r in $(seq 1 "$ROUNDS"); do
  target/bench-gemm/v3/release/posenc-gemm-bench "$SHAPES" "${ARGS[@]}" >"$OUT/gemm-v3-$r.jsonl"
  target/bench-gemm/v4/release/posenc-gemm-bench "$SHAPES" "${ARGS[@]}" >"$OUT/gemm-v4-$r.jsonl"
  "$PY" -W ignore bench/gemm_torch.py "$SHAPES" "${ARGS[@]}" >"$OUT/torch-$r.jsonl" 2>/dev/null
  "$PY" -W ignore bench/gemm_torch.py "$SHAPES" --threads 1 --repeats "$REPEATS" --min-ms "$MIN_MS" \
    --mode torch1 >"$OUT/torch1-$r.jsonl" 2>/dev/null
done
# whole training steps, each timed alone, both sides alternating (best and median step)
for s in $STEP_SCHEMES; do
  for t in $STEP_THREADS; do
    for r in 1 2; do
      RAYON_NUM_THREADS=$t "$OUT/posenc.bin" train --scheme "$s" --steps "$STEPS" --warmup 5 \
        --out "$OUT/ckpt-$s-$t-$r" --log-every 1 --quiet $POSENC_ARGS >/dev/null \
        2>"$OUT/posenc-step-$s-$t-$r.log"
      "$PY" -W ignore bench/gemm_torch.py --step "$s" --steps "$STEPS" --threads "$t" \
        >"$OUT/torch-step-$s-$t-$r.jsonl" 2>/dev/null
    done
  done
done
echo "<!-- $(date -u '+%Y-%m-%d %H:%M UTC'); $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores; load average before: $LOAD_BEFORE, after: $(uptime | sed 's/.*load average: //'); rounds $ROUNDS, repeats $REPEATS, min $MIN_MS ms, threads $THREADS; torch $("$PY" -W ignore -c 'import torch; print(torch.__version__)' 2>/dev/null) -->"
python3 bench/gemm_table.py "$OUT"
