"""torch.mm / torch.bmm on the byte LM's product shapes (bench/gemm/shapes.txt), for bench/gemm.sh.

    python bench/gemm_torch.py bench/gemm/shapes.txt --threads 2 --repeats 7 --min-ms 40

Prints one JSON line per shape: the best seconds per product over --repeats measurements,
each long enough to last --min-ms. A transposed operand is a transposed view (as autograd
passes it), a batch of 1 is torch.mm, a larger batch torch.bmm; float32.
"""
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


def main():
    p = argparse.ArgumentParser()
    p.add_argument("shapes")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--min-ms", type=float, default=40.0)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
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
            print(json.dumps(dict(name=s["name"], group=s["group"], mode="torch", batch=bt, m=m, k=k,
                                  n=n, count=s["count"], seconds=secs, gflops=flops / secs / 1e9,
                                  threads=a.threads, torch=torch.__version__)), flush=True)


if __name__ == "__main__":
    main()
