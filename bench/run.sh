#!/usr/bin/env bash
# Training throughput of the posenc byte LM (burn, Flex CPU backend) against the identical
# PyTorch model (eager), same machine, same shapes, one run. Not part of CI.
#
#   bench/run.sh                 # schemes nope rope t5 alibi, 30 steps each, batch 32 x 128
#   STEPS=50 SCHEMES="rope" bench/run.sh
#
# torch is installed from PyPI on first use into target/bench-venv (or set TORCH_PYTHON to a
# python that has it). Prints a table with tokens/s of both, the ratio posenc / PyTorch and
# the peak resident memory of each process (GNU time).
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${STEPS:-30}
SCHEMES=${SCHEMES:-"nope rope t5 alibi"}
THREADS=${THREADS:-$(nproc)}
OUT=target/bench
mkdir -p "$OUT"
PY=${TORCH_PYTHON:-target/bench-venv/bin/python}
if ! "$PY" -c "import torch" 2>/dev/null; then
  python3 -m venv target/bench-venv
  target/bench-venv/bin/pip install --quiet torch
  PY=target/bench-venv/bin/python
fi
cargo build --quiet --release --features train --bin posenc
BIN=target/release/posenc
TIME=/usr/bin/time
peak() { sed -n 's/.*Maximum resident set size (kbytes): \([0-9]*\).*/\1/p' "$1"; }
printf "%-7s %14s %14s %8s %12s %12s\n" scheme posenc_tok/s torch_tok/s ratio posenc_MiB torch_MiB
for s in $SCHEMES; do
  RAYON_NUM_THREADS=$THREADS $TIME -v "$BIN" train --scheme "$s" --steps "$STEPS" --warmup 5 \
    --out "$OUT/ckpt-$s" --log-every 0 --quiet 2>"$OUT/posenc-$s.time" >"$OUT/posenc-$s.out" || true
  ours=$(sed -n 's/.* \([0-9.]*\) tokens\/s).*/\1/p' "$OUT/posenc-$s.out")
  $TIME -v "$PY" bench/torch_lm.py --scheme "$s" --steps "$STEPS" --threads "$THREADS" \
    2>"$OUT/torch-$s.time" >"$OUT/torch-$s.json"
  theirs=$("$PY" -c "import json,sys; print(round(json.load(open(sys.argv[1]))['tokens_per_second']))" "$OUT/torch-$s.json")
  ratio=$(python3 -c "print(f'{float(\"$ours\")/float(\"$theirs\"):.2f}')")
  printf "%-7s %14.0f %14.0f %8s %12d %12d\n" "$s" "$ours" "$theirs" "$ratio" \
    $(( $(peak "$OUT/posenc-$s.time") / 1024 )) $(( $(peak "$OUT/torch-$s.time") / 1024 ))
done
