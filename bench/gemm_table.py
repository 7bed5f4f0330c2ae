"""Merges the JSON lines of bench/gemm.sh (gemm crate, torch, torch's full step) into tables.

    python3 bench/gemm_table.py RESULTS_DIR

Per shape the best time over all rounds of each mode; GFLOP/s = 2 batch m k n / seconds.
"""
import glob
import json
import os
import sys


def main():
    d = sys.argv[1]
    best, meta, order = {}, {}, []
    for path in sorted(glob.glob(os.path.join(d, "*.jsonl"))):
        for line in open(path):
            line = line.strip()
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            mode = r["mode"] + ("4" if r.get("x86_v4") else "")
            key = (r["name"], mode)
            if r["name"] not in meta:
                meta[r["name"]] = r
                order.append(r["name"])
            best[key] = min(best.get(key, float("inf")), r["seconds"])
    steps = [json.loads(l) for p in glob.glob(os.path.join(d, "torch-step-*.json"))
             for l in open(p) if l.startswith("{")]
    modes = [("st", "gemm 1 thread"), ("par", "gemm 2 threads"), ("par4", "gemm 2 threads, AVX-512"),
             ("flex", "gemm as Flex runs it, 2 threads"), ("torch", "torch 2 threads")]
    gf = lambda name, mode: (2.0 * meta[name]["batch"] * meta[name]["m"] * meta[name]["k"] * meta[name]["n"]
                             / best[(name, mode)] / 1e9) if (name, mode) in best else None
    fmt = lambda x: "-" if x is None else f"{x:.0f}"
    print("| product | batch x (m, k, n) | per step | " + " | ".join(t + " GFLOP/s" for _, t in modes)
          + " | gemm 2T / torch | best gemm / torch |")
    print("|---|---|---|" + "---|" * (len(modes) + 2))
    totals = {m: 0.0 for m, _ in modes}
    totals["flexrun"] = 0.0  # what Flex runs: flex form where it exists, else par (v3)
    totals["bestgemm"] = 0.0  # the best of the gemm crate's ways, per shape
    groups = {}
    for name in order:
        r = meta[name]
        cells = [gf(name, m) for m, _ in modes]
        gpar, gt = gf(name, "par"), gf(name, "torch")
        bestg = min(best[(name, m)] for m in ("st", "par", "par4", "flex") if (name, m) in best)
        ratio = f"{gpar / gt:.2f}" if gpar and gt else "-"
        bratio = f"{best[(name, 'torch')] / bestg:.2f}" if (name, "torch") in best else "-"
        shape = f"{r['batch']} x ({r['m']}, {r['k']}, {r['n']})"
        print(f"| {name} | {shape} | {r['count']} | " + " | ".join(fmt(c) for c in cells)
              + f" | {ratio} | {bratio} |")
        for m, _ in modes:
            if (name, m) in best:
                totals[m] += r["count"] * best[(name, m)]
        flexrun = best.get((name, "flex"), best[(name, "par")])
        totals["flexrun"] += r["count"] * flexrun
        totals["bestgemm"] += r["count"] * bestg
        g = groups.setdefault(r["group"], {"flexrun": 0.0, "torch": 0.0, "bestgemm": 0.0, "gflop": 0.0})
        g["flexrun"] += r["count"] * flexrun
        g["torch"] += r["count"] * best.get((name, "torch"), 0.0)
        g["bestgemm"] += r["count"] * bestg
        g["gflop"] += r["count"] * 2.0 * r["batch"] * r["m"] * r["k"] * r["n"] / 1e9
    gflop = sum(g["gflop"] for g in groups.values())
    print()
    print(f"Products per training step: {gflop:.2f} GFLOP ({gflop * 1e3 / 4096:.2f} MFLOP per byte).")
    print()
    print("| products per step | gemm as Flex runs them (ms) | best of the gemm crate's ways (ms) | torch (ms) |")
    print("|---|---|---|---|")
    for gname, g in groups.items():
        print(f"| {gname} ({g['gflop']:.2f} GFLOP) | {g['flexrun'] * 1e3:.1f} | {g['bestgemm'] * 1e3:.1f} | {g['torch'] * 1e3:.1f} |")
    print(f"| **all** ({gflop:.2f} GFLOP) | **{totals['flexrun'] * 1e3:.1f}** | **{totals['bestgemm'] * 1e3:.1f}** | **{totals['torch'] * 1e3:.1f}** |")
    print()
    print("Sums of the per-shape best times in each column, ms per step: "
          + ", ".join(f"{t} {totals[m] * 1e3:.1f}" for m, t in modes) + ".")
    if steps:
        print()
        print("| torch full training step (bench/torch_lm.py, 2 threads) | ms per step | products' share |")
        print("|---|---|---|")
        by = {}
        for s in steps:
            ms = 32 * 128 / s["tokens_per_second"] * 1e3
            by[s["scheme"]] = min(by.get(s["scheme"], float("inf")), ms)
        for scheme, ms in sorted(by.items()):
            print(f"| {scheme} | {ms:.1f} | {totals['torch'] * 1e3 / ms:.0%} |")
        print()
        for scheme, ms in sorted(by.items()):
            print(f"Ceiling for {scheme}: if everything but the products were free, a posenc step would take "
                  f"{totals['flexrun'] * 1e3:.1f} ms with the products as Flex runs them and "
                  f"{totals['bestgemm'] * 1e3:.1f} ms with the best of the gemm crate's ways, against "
                  f"torch's full step of {ms:.1f} ms: posenc/torch throughput at most "
                  f"{ms / (totals['flexrun'] * 1e3):.2f}x and {ms / (totals['bestgemm'] * 1e3):.2f}x. "
                  f"(torch's own products take {totals['torch'] * 1e3:.1f} ms of its step.)")


if __name__ == "__main__":
    main()
