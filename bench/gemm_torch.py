"""torch.mm / torch.bmm on the byte LM's product shapes (bench/gemm/shapes.txt), for bench/gemm.sh.

    python bench/gemm_torch.py bench/gemm/shapes.txt --threads 2 --repeats 7 --min-ms 40
    python bench/gemm_torch.py --step rope --steps 12 --threads 2

Prints one JSON line per shape: the best seconds per product over --repeats measurements,
each long enough to last --min-ms. A transposed operand is a transposed view (as autograd
passes it), a batch of 1 is torch.mm, a larger batch torch.bmm; float32.
With --step: the whole training step of bench/torch_lm.py's model (same loop: forward, loss,
backward, clipping, AdamW), each step timed alone; prints the best and the median step.
"""
import os
import statistics
import sys
import argparse
import json
import time

import torch


def parse(path):
    for line in open(path):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        f = line.split()
        yield dict(name=f[0], group=f[1], batch=int(f[2]), m=int(f[3]), k=int(f[4]), n=int(f[5]),
                   a_t=f[6] == "1", b_t=f[7] == "1", count=int(f[8]), flex=f[9])


def best_of(repeats, min_s, fn):
    t = time.perf_counter()
    fn()
    once = max(time.perf_counter() - t, 1e-7)
    calls = max(1, int(min_s / once + 0.999))
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - t) / calls)
    return best


def full_step(a):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import torch.nn.functional as F
    from torch_lm import Lm

    torch.manual_seed(0)
    text = torch.tensor(list(open(a.corpus, "rb").read()), dtype=torch.long)
    model = Lm(a.step)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.01)
    g = torch.Generator().manual_seed(0)
    times = []
    for step in range(a.steps):
        starts = torch.randint(0, len(text) - 129, (32,), generator=g)
        w = torch.stack([text[s : s + 129] for s in starts])
        t = time.perf_counter()
        logits = model(w[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, 256), w[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        loss.item()
        times.append(time.perf_counter() - t)
    rest = times[1:]
    print(json.dumps(dict(mode="torch-step", scheme=a.step, threads=a.threads, steps=len(rest),
                          best_seconds=min(rest), median_seconds=statistics.median(rest),
                          torch=torch.__version__)), flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("shapes", nargs="?")
    p.add_argument("--mode", default="torch", help="the mode name written in the output")
    p.add_argument("--step", help="time the whole training step of this scheme instead")
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--corpus", default="data/corpus/train.txt")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--min-ms", type=float, default=40.0)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    if a.step:
        return full_step(a)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for s in parse(a.shapes):
            bt, m, k, n = s["batch"], s["m"], s["k"], s["n"]
            # stored shapes, then the views that enter the product
            A = torch.rand((bt, k, m) if s["a_t"] else (bt, m, k), generator=g) * 2 - 1
            B = torch.rand((bt, n, k) if s["b_t"] else (bt, k, n), generator=g) * 2 - 1
            A = A.transpose(1, 2) if s["a_t"] else A
            B = B.transpose(1, 2) if s["b_t"] else B
            if bt == 1:
                A2, B2 = A[0], B[0]
                out = torch.empty(m, n)
                fn = lambda: torch.mm(A2, B2, out=out)
            else:
                out = torch.empty(bt, m, n)
                fn = lambda: torch.bmm(A, B, out=out)
            secs = best_of(a.repeats, a.min_ms / 1000, fn)
            flops = 2.0 * bt * m * k * n
            print(json.dumps(dict(name=s["name"], group=s["group"], mode=a.mode, batch=bt, m=m, k=k,
                                  n=n, count=s["count"], seconds=secs, gflops=flops / secs / 1e9,
                                  threads=a.threads, torch=torch.__version__)), flush=True)


if __name__ == "__main__":
    main()
