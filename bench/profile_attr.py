"""Where a training step's time goes: attributes `perf script` samples of `posenc train` to
operations by their call chains (bench/profile.sh).

    perf script -F pid,tid,time,event,ip,sym --no-inline -i perf.data | python3 bench/profile_attr.py --title rope

Input: cpu-clock samples with call chains (and optionally sched:sched_switch events, used only
as context for rayon worker threads). Output: markdown tables.

Method
* The main thread's samples mark the phases of every step: forward (a chain through
  `Lm::nll` / `Lm::forward_traced`), backward (through autodiff's `execute_steps`),
  optimizer (`burn_optim`). A step starts at the first forward sample after an optimizer or
  backward sample. Only the samples (of all threads) from the start of the second step to the
  start of the last one count: steps 2..N-1, without start-up, the first step's warm-up, and
  the checkpoint written at the end.
* Each sample is attributed by walking its chain from the leaf to the root and taking the first
  frame that a rule recognises. Memory traffic (page faults, allocation, memcpy/memset, layout
  copies) is recognised first, so it is counted apart from the operation it serves (a second
  table says which operations those are).
* Samples of rayon worker threads carry no model frames when they run a parallel kernel of
  Flex (their chain goes from the worker's loop to the kernel). A worker sample whose chain
  names no operation takes the operation of the main thread's latest event (sample or
  context switch) within 30 ms, since the main thread waits inside the operation that handed
  the work out; forward or backward comes from the phase at its time stamp.
* Backward nodes of decomposed operations (Exp, Div, Sub, Sum, Mul, Add, ... of softmax,
  LayerNorm, log-softmax, RoPE, biases and residuals) carry no trace of the forward operation
  that created them: they are one row, split by node type in a third table. Matmul, Gelu,
  MaskFill and Gather nodes are recognised by name.
* Milliseconds are CPU time: samples x sampling period, summed over threads, per step.
"""
import argparse
import bisect
import json
import collections
import re
import sys

# ---------------------------------------------------------------------------------------------
# rules: (category, regex) checked against one frame; the first rule that matches the first
# frame (from the leaf) that any rule matches decides.

MEMORY = [
    ("memory: page faults", r"asm_exc_page_fault|^exc_page_fault|do_anonymous_page|handle_mm_fault"),
    ("memory: alloc/free (malloc, brk, munmap)",
     r"^(__libc_)?(malloc|free|cfree|realloc|calloc)(@|$)|_int_malloc|_int_free|malloc_consolidate|"
     r"sysmalloc|systrim|__sbrk|__brk|__do_sys_brk|__x64_sys_munmap|__x64_sys_mmap|__x64_sys_madvise|"
     r"__rust_alloc|__rust_dealloc|__rust_realloc|unlink_chunk|tcache"),
    ("memory: memcpy/memset", r"__mem(move|cpy|set)|^mem(move|cpy|set)(@|$)|clear_page|copy_page"),
    ("memory: layout copies and fills",
     r"burn_flex::tensor::copy_|FlexTensor::to_contiguous|FlexTensor::filled|cubecl_environment::bytes|"
     r"FlexTensor::(copy|contiguous)"),
]

THREADING = [
    ("threading: rayon sleep/wake/steal, futex",
     r"futex|^__schedule$|^schedule$|finish_task_switch|rayon_core::sleep|crossbeam_deque|crossbeam_epoch|"
     r"rayon_core::latch|WorkerThread::take_local_job|WorkerThread::find_work|Registry::inject|"
     r"in_worker_cold|sched_yield|__x64_sys_sched_yield"),
]

# a chain that reaches one of these was unwound as far as the model code or its thread's entry
ROOT = re.compile(r"posenc::|burn_optim|^main$|start_thread|thread_start|clone3|__libc_start|^_start")

BACKWARD_NODE = re.compile(r"::([A-Za-z0-9_]+) as burn_autodiff::ops::backward::Backward<")

OPS = [
    # products
    ("products", r"^gemm_|^gemm::|gemm_common::|gemm_f32::|burn_flex::ops::matmul::|float_matmul|"
                 r"::Matmul as burn_autodiff"),
    # GELU
    ("GELU", r"::Gelu as burn_autodiff|(?i:gelu)|libm::math::erf"),
    # loss before softmax (log_softmax contains 'softmax')
    ("loss (log-softmax, gather, mean)", r"log_softmax|posenc::lm::model::Lm::nll|::Gather as burn_autodiff|"
                                         r"posenc::lm::model::Lm::loss|kernels::cpu::nll_|NllBackward|nll_with"),
    # a fused attention kernel (--kernels fused): softmax, mask, bias (forward and backward)
    ("attention: fused kernel", r"kernels::cpu::attention|AttentionBackward|attention_forward_flex|"
                                r"kernels::attention|kernels::reference_attention|kernels::cpu::softmax_row|"
                                r"kernels::cpu::probs_row"),
    ("attention: softmax", r"softmax"),
    ("LayerNorm", r"LayerNorm::forward|layer_norm|LayerNormBackward"),
    ("attention: mask, scale, bias, RoPE, head split",
     r"posenc::lm::model::attention::|::MaskFill as burn_autodiff|mask_fill|score_bias|position_terms|"
     r"SelfAttention::forward_parts"),
    ("optimizer (AdamW, clipping)", r"burn_optim|grad_clipping|DynOptimizer|GradientsParams"),
    ("backward of decomposed ops", r"as burn_autodiff::ops::backward::Backward<"),
    ("Linear bias add", r"Linear::forward|module::linear|fused_linear|linear_flex|linear_with|LinearBackward|"
                        r"kernels::cpu::linear_"),
    ("embedding, residuals, other model code", r"posenc::lm::model::Lm::forward_traced|add_positions"),
    ("autodiff bookkeeping (graph, gradients)",
     r"burn_autodiff::runtime|burn_autodiff::graph|Gradients::register|burn_autodiff::grads|"
     r"burn_autodiff::checkpoint|backward_impl"),
    ("data (batches)", r"posenc::lm::data::|int_tensor"),
]

MEMORY = [(c, re.compile(p)) for c, p in MEMORY]
THREADING = [(c, re.compile(p)) for c, p in THREADING]
OPS = [(c, re.compile(p)) for c, p in OPS]
ALL = MEMORY + THREADING + OPS
OP_CATS = {c for c, _ in OPS}


def op_of(frames):
    """The first operation rule matched from the leaf, with its frame index, or (None, None)."""
    for i, f in enumerate(frames):
        for cat, rx in OPS:
            if rx.search(f):
                return cat, i
    return None, None


def first_rule(frames):
    for i, f in enumerate(frames):
        for cat, rx in ALL:
            if rx.search(f):
                return cat, i
    return None, None


def product_kind(frames):
    """attention / linear / logits / backward for a chain that reaches a product."""
    joined = "\n".join(frames)
    if "::Matmul as burn_autodiff" in joined:
        # the weight gradient of a broadcast weight: partial products summed over the batch
        pre = joined.split("::Matmul as burn_autodiff")[0]
        if "backward_rhs" in pre or "sum_dim" in pre:
            return "products, backward: dW batch sums (broadcast weights)"
        return "products, backward (attention + Linear + logits; not separable by call chain)"
    if re.search(r"kernels::cpu::attention|AttentionBackward|attention_forward_flex", joined):
        return "products, attention inside the fused kernel"
    if "posenc::lm::model::attention::attend" in joined:
        return "products, forward: attention (QK^T, PV)"
    if "LinearBackward" in joined or "kernels::cpu::linear_backward" in joined:
        return "products, backward: fused Linear (dX, dW)"
    if ("Linear::forward" in joined or "module::linear" in joined or "fused_linear" in joined
            or "kernels::cpu::linear_forward" in joined or "linear_flex" in joined or "linear_with" in joined):
        return "products, forward: Linear (q, k, v, o, FFN)"
    if "Lm::forward_traced" in joined:
        return "products, forward: logits (h E^T)"
    return None


# ---------------------------------------------------------------------------------------------

HEADER = re.compile(r"^\s*(\S.*?)\s+(\d+)/(\d+)\s+(\d+\.\d+):\s+(?:(\d+)\s+)?(\S+):")


def parse(stream):
    """Yields (pid, tid, time, event, period, frames) from `perf script -F pid,tid,time,event,ip,sym`
    (with or without period)."""
    head, frames = None, []
    for line in stream:
        line = line.rstrip("\n")
        if not line.strip():
            if head:
                yield head + (frames,)
            head, frames = None, []
            continue
        if head is None:
            m = re.match(r"^\s*(\d+)/(\d+)\s+(\d+\.\d+):\s+(?:(\d+)\s+)?(\S+?):?\s", line + " ")
            if not m:
                continue
            pid, tid, t, period, ev = m.groups()
            head = (int(pid), int(tid), float(t), ev.rstrip(":"), int(period) if period else None)
            continue
        # "  ffffffff821f8b58 __schedule" or "  99a2e4 sym (dso)"
        parts = line.strip().split(" ", 1)
        sym = parts[1] if len(parts) > 1 else "[unknown]"
        sym = re.sub(r"\s+\([^()]*\)$", "", sym)  # a trailing (dso)
        sym = re.sub(r"\+0x[0-9a-f]+$", "", sym)
        frames.append(sym)
    if head:
        yield head + (frames,)


def phase_of(frames):
    j = "\n".join(frames)
    if "burn_optim" in j or "grad_clipping" in j:
        return "optim"
    if "execute_steps" in j or "backward_impl" in j or "as burn_autodiff::ops::backward::Backward<" in j:
        return "backward"
    if "posenc::lm::model::Lm::nll" in j or "Lm::forward_traced" in j or "Lm::loss" in j:
        return "forward"
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--title", default="")
    ap.add_argument("--period-ms", type=float, default=None,
                    help="sampling period in ms (default: from the samples' period field, else 1)")
    ap.add_argument("--skip-first", type=int, default=1, help="steps to drop at the start (warm-up)")
    ap.add_argument("--json", help="also write the figures per step to this file")
    ap.add_argument("--combine", nargs="+", metavar="JSON",
                    help="print one table of several --json files side by side, and nothing else")
    a = ap.parse_args()
    if a.combine:
        return combine(a.combine)

    events = list(parse(sys.stdin))
    samples = [e for e in events if e[3] == "cpu-clock"]
    switches = [e for e in events if e[3].startswith("sched")]
    if not samples:
        sys.exit("profile_attr: no cpu-clock samples in the input")
    pid = collections.Counter(e[0] for e in samples).most_common(1)[0][0]
    samples = [e for e in samples if e[0] == pid]
    main_tid = pid
    period_ns = [e[4] for e in samples if e[4]]
    period_ms = a.period_ms or (sum(period_ns) / len(period_ns) / 1e6 if period_ns else 1.0)

    # step boundaries from the main thread's phases
    main_s = sorted((e for e in samples if e[1] == main_tid), key=lambda e: e[2])
    starts, prev_done, last_phase = [], True, None
    phases = []  # (time, phase) of main samples with a known phase
    for e in main_s:
        ph = phase_of(e[5])
        if ph is None:
            continue
        phases.append((e[2], ph))
        if ph == "forward" and prev_done:
            starts.append(e[2])
            prev_done = False
        elif ph in ("backward", "optim"):
            prev_done = True
        last_phase = ph
    if len(starts) < a.skip_first + 2:
        sys.exit(f"profile_attr: found {len(starts)} step starts; run more steps")
    t0, t1 = starts[a.skip_first], starts[-1]
    nsteps = len(starts) - 1 - a.skip_first
    wall_ms = (t1 - t0) * 1e3 / nsteps
    phase_t = [p[0] for p in phases]

    def phase_at(t):
        i = bisect.bisect_right(phase_t, t) - 1
        return phases[i][1] if i >= 0 else None

    # the main thread's latest event (sample or switch) before t: its operation
    main_ev = sorted([(e[2], e[5]) for e in main_s]
                     + [(e[2], e[5]) for e in switches if e[1] == main_tid and e[0] == pid])
    main_ev_t = [x[0] for x in main_ev]
    main_op_cache = {}

    def main_context(t):
        i = bisect.bisect_right(main_ev_t, t) - 1
        if i < 0 or t - main_ev_t[i] > 0.030:
            return None, None
        if i not in main_op_cache:
            fr = main_ev[i][1]
            op, _ = op_of(fr)
            main_op_cache[i] = (op, product_kind(fr) if op == "products" else None)
        return main_op_cache[i]

    cat_ms = collections.Counter()
    cat_split = collections.defaultdict(collections.Counter)  # category -> fwd/bwd/opt/threads
    mem_by_op = collections.defaultdict(collections.Counter)
    node_ms = collections.Counter()
    unattributed = collections.Counter()
    thread_ms = collections.Counter()
    borrowed = 0.0
    truncated = 0.0
    total = 0.0
    for pid_, tid, t, ev, period, frames in samples:
        if not (t0 <= t < t1):
            continue
        ms = (period / 1e6) if (period and not a.period_ms) else period_ms
        total += ms
        worker = tid != main_tid
        if not any(ROOT.search(f) for f in frames):
            truncated += ms
        thread_ms["rayon workers" if worker else "main thread"] += ms
        ph = phase_at(t) or "other"
        cat, idx = first_rule(frames)
        op, op_idx = op_of(frames)
        kind = product_kind(frames) if op == "products" else None
        if worker and (op is None or (op == "products" and kind is None)):
            # a worker runs a kernel handed out by the main thread: take its operation
            mop, mkind = main_context(t)
            if op is None and mop is not None:
                op = mop
                borrowed += ms
            if op == "products" and kind is None:
                kind = mkind
        if cat is None or cat in OP_CATS:
            cat = op
        if cat is None:
            if worker and any("wait_until_cold" in f or "rayon_core" in f for f in frames):
                cat = "threading: rayon sleep/wake/steal, futex"
            else:
                cat = "unattributed"
                unattributed[frames[0] if frames else "[no chain]"] += ms
        if cat == "products":
            cat = kind or ("products, forward (context not found)" if ph == "forward"
                           else "products, backward (attention + Linear + logits; not separable by call chain)"
                           if ph == "backward" else "products (phase unknown)")
        if cat.startswith("memory"):
            mem_by_op[cat][op or "unknown"] += ms
        if cat == "backward of decomposed ops":
            m = None
            for f in frames:
                m = BACKWARD_NODE.search(f)
                if m:
                    break
            node_ms[m.group(1) if m else "?"] += ms
        cat_ms[cat] += ms
        cat_split[cat][{"forward": "fwd", "backward": "bwd", "optim": "opt"}.get(ph, "other")] += ms

    per = lambda x: x / nsteps
    title = f" ({a.title})" if a.title else ""
    print(f"### Where a training step's time goes{title}\n")
    print(f"Steps {a.skip_first + 1}..{len(starts) - 1} of {len(starts)} measured ({nsteps} steps); "
          f"wall time {wall_ms:.0f} ms per step under perf; CPU time {per(total):.0f} ms per step "
          f"(main thread {per(thread_ms['main thread']):.0f}, rayon workers {per(thread_ms['rayon workers']):.0f}); "
          f"sampling period {period_ms:.3f} ms, {int(round(total / period_ms))} samples.\n")
    print("| category | CPU ms/step | % of CPU | in forward | in backward | in optimizer | elsewhere |")
    print("|---|---|---|---|---|---|---|")
    order = sorted(cat_ms, key=lambda c: -cat_ms[c])
    groups = collections.OrderedDict()
    for c in order:
        g = next((k for k in ("products", "memory", "attention", "threading") if c.startswith(k)), c)
        groups.setdefault(g, []).append(c)
    for c in order:
        s = cat_split[c]
        print(f"| {c} | {per(cat_ms[c]):.1f} | {100 * cat_ms[c] / total:.1f} | {per(s['fwd']):.1f} | "
              f"{per(s['bwd']):.1f} | {per(s['opt']):.1f} | {per(s['other']):.1f} |")
    print(f"| **total** | **{per(total):.1f}** | 100 | {per(sum(s['fwd'] for s in cat_split.values())):.1f} | "
          f"{per(sum(s['bwd'] for s in cat_split.values())):.1f} | {per(sum(s['opt'] for s in cat_split.values())):.1f} | "
          f"{per(sum(s['other'] for s in cat_split.values())):.1f} |")
    print()
    print("Summed by kind: " + "; ".join(
        f"{g} {per(sum(cat_ms[c] for c in cs)):.0f} ms ({100 * sum(cat_ms[c] for c in cs) / total:.0f}%)"
        for g, cs in sorted(groups.items(), key=lambda kv: -sum(cat_ms[c] for c in kv[1]))) + ".")
    print()
    print(f"Worker samples without a model frame given the main thread's operation: "
          f"{per(borrowed):.1f} ms/step. Unattributed: {per(cat_ms['unattributed']):.1f} ms/step "
          f"({100 * cat_ms['unattributed'] / total:.1f}%)"
          + ("; leaf frames: " + ", ".join(f"`{f[:60]}` {per(v):.1f}" for f, v in unattributed.most_common(5))
             if unattributed else "") + ". "
          f"Chains that stop before any model code or thread entry (lost by the unwinder): {per(truncated):.1f} ms/step "
          f"({100 * truncated / total:.1f}%; they still count by their leaf frames).")
    if mem_by_op:
        print()
        print("Memory traffic by the operation it serves (CPU ms/step):\n")
        print("| memory | " + " | ".join(["products", "GELU", "attention", "LayerNorm", "loss", "decomposed backward", "optimizer", "other"]) + " |")
        print("|---|" + "---|" * 8)
        for c in sorted(mem_by_op, key=lambda c: -sum(mem_by_op[c].values())):
            row = collections.Counter()
            for op, v in mem_by_op[c].items():
                key = ("products" if op == "products" else "GELU" if op == "GELU"
                       else "attention" if op.startswith("attention") else "LayerNorm" if op == "LayerNorm"
                       else "loss" if op.startswith("loss") else "decomposed backward" if op.startswith("backward")
                       else "optimizer" if op.startswith("optimizer") else "other")
                row[key] += v
            print(f"| {c} | " + " | ".join(f"{per(row[k]):.1f}" for k in
                  ["products", "GELU", "attention", "LayerNorm", "loss", "decomposed backward", "optimizer", "other"]) + " |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(title=a.title, steps=nsteps, wall_ms=wall_ms, cpu_ms=per(total),
                           main_ms=per(thread_ms["main thread"]), worker_ms=per(thread_ms["rayon workers"]),
                           categories={c: per(v) for c, v in cat_ms.items()},
                           split={c: {k: per(v) for k, v in s.items()} for c, s in cat_split.items()}), f)
    if node_ms:
        print()
        print("Backward of decomposed ops by autodiff node (CPU ms/step): "
              + ", ".join(f"{n} {per(v):.1f}" for n, v in node_ms.most_common()) + ".")
    print()


# the summary's rows: (label, categories summed)
SUMMARY = [
    ("products, forward: Linear (q, k, v, o, FFN up/down)", ["products, forward: Linear (q, k, v, o, FFN)"]),
    ("products, forward: attention (QK^T, PV)", ["products, forward: attention (QK^T, PV)"]),
    ("products, forward: logits", ["products, forward: logits (h E^T)"]),
    ("products, forward: context not found", ["products, forward (context not found)", "products (phase unknown)"]),
    ("products, backward (dX, dW of all products)", ["products, backward (attention + Linear + logits; not separable by call chain)"]),
    ("products, backward: dW batch sums", ["products, backward: dW batch sums (broadcast weights)"]),
    ("products, backward: fused Linear (dX, dW)", ["products, backward: fused Linear (dX, dW)"]),
    ("products, attention inside the fused kernel (forward + backward)", ["products, attention inside the fused kernel"]),
    ("attention: softmax (composed; its backward is in the decomposed row)", ["attention: softmax"]),
    ("attention: mask, scale, bias, RoPE, head split", ["attention: mask, scale, bias, RoPE, head split"]),
    ("attention: fused kernel (softmax, mask, bias; forward + backward)", ["attention: fused kernel"]),
    ("GELU (forward + backward)", ["GELU"]),
    ("LayerNorm (composed: forward only; fused: forward + backward)", ["LayerNorm"]),
    ("loss: log-softmax + NLL (composed: forward only; fused: both)", ["loss (log-softmax, gather, mean)"]),
    ("backward of decomposed ops (softmax, LayerNorm, log-softmax, RoPE, biases, residuals)", ["backward of decomposed ops"]),
    ("optimizer (AdamW, clipping)", ["optimizer (AdamW, clipping)"]),
    ("memory: page faults", ["memory: page faults"]),
    ("memory: memcpy/memset", ["memory: memcpy/memset"]),
    ("memory: alloc/free", ["memory: alloc/free (malloc, brk, munmap)"]),
    ("memory: layout copies and fills", ["memory: layout copies and fills"]),
    ("autodiff bookkeeping", ["autodiff bookkeeping (graph, gradients)"]),
    ("threading (rayon sleep/wake)", ["threading: rayon sleep/wake/steal, futex"]),
    ("other (Linear bias add, embedding, residuals, data)", ["Linear bias add", "embedding, residuals, other model code",
                                                             "data (batches)"]),
    ("unattributed", ["unattributed"]),
]


def combine(paths):
    runs = [json.load(open(p)) for p in paths]
    known = {c for _, cs in SUMMARY for c in cs}
    print("| CPU ms per step (% of the step's CPU time) | " + " | ".join(r["title"] or p for r, p in zip(runs, paths)) + " |")
    print("|---|" + "---|" * len(runs))
    for label, cats in SUMMARY:
        vals = [sum(r["categories"].get(c, 0.0) for c in cats) for r in runs]
        if all(v == 0 for v in vals):
            continue
        print(f"| {label} | " + " | ".join(f"{v:.0f} ({100 * v / r['cpu_ms']:.0f}%)" for v, r in zip(vals, runs)) + " |")
    extra = [sum(v for c, v in r["categories"].items() if c not in known) for r in runs]
    if any(extra):
        print("| (other categories) | " + " | ".join(f"{v:.0f}" for v in extra) + " |")
    groups = [("all products", lambda c: c.startswith("products")), ("all memory traffic", lambda c: c.startswith("memory"))]
    for label, pred in groups:
        vals = [sum(v for c, v in r["categories"].items() if pred(c)) for r in runs]
        print(f"| **{label}** | " + " | ".join(f"**{v:.0f} ({100 * v / r['cpu_ms']:.0f}%)**" for v, r in zip(vals, runs)) + " |")
    print("| **CPU time per step** (main thread + rayon workers) | " + " | ".join(
        f"**{r['cpu_ms']:.0f}** ({r['main_ms']:.0f} + {r['worker_ms']:.0f})" for r in runs) + " |")
    print("| wall time per step under perf | " + " | ".join(f"{r['wall_ms']:.0f}" for r in runs) + " |")


if __name__ == "__main__":
    main()
