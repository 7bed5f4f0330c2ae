"""Merges the JSON lines of bench/gemm.sh (gemm crate, torch, torch's full step) into tables.

    python3 bench/gemm_table.py RESULTS_DIR

Per shape the best time over all rounds of each mode; GFLOP/s = 2 batch m k n / seconds.
"""
import glob
import json
import os
import re
import statistics
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
            if "name" not in r:
                continue
            mode = r["mode"] + ("4" if r.get("x86_v4") else "")
            key = (r["name"], mode)
            if r["name"] not in meta:
                meta[r["name"]] = r
                order.append(r["name"])
            best[key] = min(best.get(key, float("inf")), r["seconds"])
    # whole steps: torch's JSON lines, posenc's "... N tokens/s" log lines (step 1 left out)
    steps = {}
    for p in glob.glob(os.path.join(d, "torch-step-*.jsonl")):
        for l in open(p):
            if l.startswith("{"):
                r = json.loads(l)
                steps.setdefault(("torch", r["scheme"], r["threads"]), []).append(r)
    for p in glob.glob(os.path.join(d, "posenc-step-*.log")):
        parts = os.path.basename(p)[:-4].split("-")  # posenc-step-SCHEME[-THREADS]-RUN.log
        scheme, threads = parts[2], (parts[3] if len(parts) == 5 else 2)
        per = [4096 / float(m.group(2)) for m in (re.search(r"step (\d+):.* ([0-9.]+) tokens/s", l) for l in open(p))
               if m is not None and int(m.group(1)) > 1]
        if per:
            steps.setdefault(("posenc", scheme, int(threads)), []).append(
                dict(best_seconds=min(per), median_seconds=statistics.median(per), steps=len(per)))
    modes = [("st", "gemm 1 thread"), ("st4", "gemm 1 thread, AVX-512"), ("par", "gemm 2 threads"),
             ("par4", "gemm 2 threads, AVX-512"),
             ("flex", "gemm as Flex runs it, 2 threads"), ("torch", "torch 2 threads"),
             ("torch1", "torch 1 thread")]
    gf = lambda name, mode: (2.0 * meta[name]["batch"] * meta[name]["m"] * meta[name]["k"] * meta[name]["n"]
                             / best[(name, mode)] / 1e9) if (name, mode) in best else None
    fmt = lambda x: "-" if x is None else f"{x:.0f}"
    print("| product | batch x (m, k, n) | per step | " + " | ".join(t + " GFLOP/s" for _, t in modes)
          + " | gemm / torch, 2 threads | gemm / torch, 1 thread | best gemm / torch 2T |")
    print("|---|---|---|" + "---|" * (len(modes) + 3))
    totals = {m: 0.0 for m, _ in modes}
    totals["flexrun"] = 0.0  # what Flex runs: flex form where it exists, else par (v3)
    totals["bestgemm"] = 0.0  # the best of the gemm crate's ways, per shape
    groups = {}
    for name in order:
        r = meta[name]
        cells = [gf(name, m) for m, _ in modes]
        gpar, gt = gf(name, "par"), gf(name, "torch")
        bestg = min(best[(name, m)] for m in ("st", "st4", "par", "par4", "flex") if (name, m) in best)
        ratio = f"{gpar / gt:.2f}" if gpar and gt else "-"
        g1, t1 = gf(name, "st"), gf(name, "torch1")
        ratio1 = f"{g1 / t1:.2f}" if g1 and t1 else "-"
        bratio = f"{best[(name, 'torch')] / bestg:.2f}" if (name, "torch") in best else "-"
        shape = f"{r['batch']} x ({r['m']}, {r['k']}, {r['n']})"
        print(f"| {name} | {shape} | {r['count']} | " + " | ".join(fmt(c) for c in cells)
              + f" | {ratio} | {ratio1} | {bratio} |")
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
        print("| whole training step | threads | best step (ms) | median step (ms) | steps timed |")
        print("|---|---|---|---|---|")
        best_step = {}
        for (side, scheme, th), runs in sorted(steps.items(), key=lambda kv: (kv[0][1], kv[0][2], kv[0][0])):
            b = min(r["best_seconds"] for r in runs) * 1e3
            med = statistics.median(r["median_seconds"] for r in runs) * 1e3
            best_step[(side, scheme, th)] = (b, med)
            print(f"| {side} {scheme} | {th} | {b:.0f} | {med:.0f} | {sum(r['steps'] for r in runs)} |")
        # product floors per thread count: (as burn-flex runs them, best of the gemm crate's ways, torch)
        one_best = sum(meta[n]["count"] * min(best[(n, m)] for m in ("st", "st4") if (n, m) in best) for n in order)
        floors = {1: (totals["st"], one_best, totals["torch1"]),
                  2: (totals["flexrun"], totals["bestgemm"], totals["torch"])}
        print()
        print("| products only, ms per step | threads | as burn-flex runs them (AVX2) | best of the gemm crate (AVX-512 where faster) | torch |")
        print("|---|---|---|---|---|")
        for th, (f, b, t) in floors.items():
            print(f"| sum over the shapes | {th} | {f * 1e3:.0f} | {b * 1e3:.0f} | {t * 1e3:.0f} |")
        for (side, scheme, th) in sorted(best_step):
            if side != "torch" or th not in floors:
                continue
            t = best_step[("torch", scheme, th)][0]
            p = best_step.get(("posenc", scheme, th))
            f, b, tp = (x * 1e3 for x in floors[th])
            now = f" posenc's best step: {p[0]:.0f} ms, {t / p[0]:.2f}x torch's throughput." if p else ""
            print()
            print(f"**Ceiling, {scheme}, {th} thread{'s' if th > 1 else ''}.** torch's best step: {t:.0f} ms, "
                  f"of which its products {tp:.0f} ms ({tp / t:.0%}).{now} "
                  f"If everything but the products were free, a posenc step would take {f:.0f} ms with "
                  f"the products as burn-flex runs them: posenc/torch <= {t / f:.2f}x; with the best of the "
                  f"gemm crate's ways per shape {b:.0f} ms: <= {t / b:.2f}x. 1.2x torch means a step of "
                  f"{t / 1.2:.0f} ms, leaving {t / 1.2 - f:.0f} ms (burn-flex's products) or "
                  f"{t / 1.2 - b:.0f} ms (best gemm) for everything else.")

if __name__ == "__main__":
    main()
