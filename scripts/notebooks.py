#!/usr/bin/env python3
"""Execute, check and time the evcxr notebooks in notebooks/.

Run with the project's virtualenv (scripts/setup creates it): .venv/bin/python scripts/notebooks.py

  run [NB...]       execute notebooks (default: notebooks/*.ipynb), each with a fresh kernel
                    and a time limit, --jobs at a time (longest first by the last run's
                    times); print one line per notebook and a final "N passed, M failed";
                    exit 1 if any failed
  prewarm           execute only the first cell of the first notebook (the `:dep` cell) in
                    each of --slots build slots, so that they hold every notebook dependency
  check-clean [NB]  fail if a notebook carries outputs or execution counts (nbstripout --verify),
                    or a code cell over 25 lines or a code line over 100 characters
  strip [NB...]     remove outputs and execution counts in place (nbstripout)
  timings           print the performance figures of docs/performance.md (see --help)

A notebook fails when a cell raises an error (compile error, panic, kernel death), when a
cell writes to stderr (evcxr prints an `Err` returned by `?` there and carries on) unless
the cell is tagged `allow-stderr`, or when it runs past its time limit.
"""

import argparse
import concurrent.futures
import hashlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
KERNEL = os.environ.get("POSENC_KERNEL", "rust")
ALLOW_STDERR_TAG = "allow-stderr"


def notebook_paths(args_paths):
    if args_paths:
        return [Path(p).resolve() for p in args_paths]
    return sorted(NOTEBOOKS.glob("*.ipynb"))


# scripts/setup registers the "rust" kernel (scripts/evcxr-kernel) here; first on JUPYTER_PATH,
# it wins over any other "rust" kernel, such as the one `evcxr_jupyter --install` writes.
KERNELS_PATH = ROOT / ".venv" / "share" / "posenc" / "jupyter"
if str(KERNELS_PATH) not in os.environ.get("JUPYTER_PATH", "").split(os.pathsep):
    os.environ["JUPYTER_PATH"] = os.pathsep.join(
        p for p in [str(KERNELS_PATH), os.environ.get("JUPYTER_PATH", "")] if p
    )


def kernel_env():
    """Environment for kernels: cargo on PATH."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path.home() / ".cargo" / "bin"), env.get("PATH", "")])
    return env


def check_kernel():
    """Fail early, and clearly, if the kernel is not ours."""
    from jupyter_client.kernelspec import KernelSpecManager

    spec = KernelSpecManager().get_kernel_spec(KERNEL)
    if not spec.argv or not spec.argv[0].endswith("evcxr-kernel"):
        raise SystemExit(f"kernel {KERNEL!r} is {spec.argv}, not scripts/evcxr-kernel: "
                         "run scripts/setup kernel")


def rel(path):
    try:
        return str(Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


# ---------------------------------------------------------------------------------------------
# run / run-one


class StderrOutput(Exception):
    """A cell wrote to stderr: with evcxr, that is how an `Err` from `?` shows."""


def execute_notebook(path, html_dir=None, cell_timeout=600, only_first_cell=False):
    """Execute one notebook in a fresh kernel; raise on the first failing cell."""
    import nbformat
    from nbclient import NotebookClient

    import warnings

    # Cells without ids (nbformat < 4.5 files) are fine to execute; ids are added in memory.
    warnings.filterwarnings("ignore", message="Cell is missing an id field")
    nb = nbformat.read(path, as_version=4)
    if only_first_cell:
        first = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
        nb.cells = nb.cells[: first + 1]

    def check_stderr(cell, cell_index, execute_reply):
        if ALLOW_STDERR_TAG in cell.get("metadata", {}).get("tags", []):
            return
        err = "".join(
            o.get("text", "")
            for o in cell.get("outputs", [])
            if o.get("output_type") == "stream" and o.get("name") == "stderr"
        )
        if err.strip():
            raise StderrOutput(
                f"cell {cell_index} wrote to stderr (an Err from `?`, or eprintln!; tag the "
                f"cell '{ALLOW_STDERR_TAG}' if intended):\n{err.strip()}\n--- cell source ---\n"
                f"{cell.source}"
            )

    running = {}

    def note_start(cell, cell_index):
        running["cell"] = cell_index

    client = NotebookClient(
        nb,
        kernel_name=KERNEL,
        timeout=cell_timeout,
        startup_timeout=120,
        allow_errors=False,
        record_timing=True,
        resources={"metadata": {"path": str(path.parent)}},
        on_cell_executed=check_stderr,
        on_cell_start=note_start,
    )
    try:
        client.execute(env=kernel_env())
    except Exception as e:
        where = f"cell {running['cell']}" if "cell" in running else "before the first cell"
        if isinstance(e, Stopped) or STOPPED:
            raise Stopped(f"stopped past the notebook's time limit; {where} was running:\n"
                          f"{nb.cells[running['cell']].source}" if "cell" in running
                          else f"stopped past the notebook's time limit ({where})") from e
        # evcxr puts the compiler's message in the cell's error output, not in the reply.
        errors = [
            "\n".join([o.get("evalue", "")] + o.get("traceback", []))
            for c in nb.cells
            for o in c.get("outputs", [])
            if o.get("output_type") == "error"
        ]
        if errors:
            raise RuntimeError(f"{where}: {e}\n" + strip_ansi("\n".join(errors))) from e
        raise RuntimeError(f"{where}: {e}") from e
    finally:
        if html_dir is not None:
            export_html(nb, Path(html_dir) / (path.stem + ".html"))
    return nb


def strip_ansi(text):
    import re

    return re.sub(r"\x1b\[[0-9;]*m", "", text)


# KaTeX, unpacked from its npm package by the Makefile (`make target/katex/...`).
KATEX_DIST = Path(os.environ.get("POSENC_KATEX_DIST", ROOT / "target/katex/package/dist"))


def export_html(nb, out):
    """Write `nb` as one offline HTML page (template scripts/nbconvert/posenc: KaTeX inline)."""
    from nbconvert import HTMLExporter

    try:
        katex = {
            "katex_js": (KATEX_DIST / "katex.min.js").read_text(encoding="utf-8"),
            "katex_auto_render_js":
                (KATEX_DIST / "contrib/auto-render.min.js").read_text(encoding="utf-8"),
        }
    except OSError as e:
        raise RuntimeError(f"KaTeX is missing ({e}); `make html` unpacks it with npm") from e
    out.parent.mkdir(parents=True, exist_ok=True)
    exporter = HTMLExporter(template_name="posenc",
                            extra_template_basedirs=[str(ROOT / "scripts" / "nbconvert")])
    body, _ = exporter.from_notebook_node(nb, resources=katex)
    out.write_text(body, encoding="utf-8")


class Stopped(Exception):
    """SIGTERM from the runner: the notebook ran past its time limit."""


STOPPED = []  # non-empty once the runner has sent SIGTERM


def cmd_run_one(args):
    path = Path(args.notebook).resolve()

    def stop(signum, frame):
        STOPPED.append(signum)
        raise Stopped("stopped past the notebook's time limit")

    # nbclient shuts the kernel down when execution ends with an exception.
    signal.signal(signal.SIGTERM, stop)
    try:
        execute_notebook(path, args.html_dir, args.cell_timeout, args.first_cell)
    except Exception as e:  # noqa: BLE001 - every failure is reported the same way
        detail = "\n".join(line for line in str(e).splitlines() if line.strip())
        print(f"FAILED {rel(path)}: {type(e).__name__}: {detail}", file=sys.stderr, flush=True)
        return 1
    return 0


def descendants(pid):
    """Process ids below `pid` (Linux /proc): kernels run in sessions of their own."""
    children = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            continue
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_tree(pid):
    """SIGKILL the process groups of `pid` and of everything below it."""
    groups = set()
    for p in [pid] + descendants(pid):
        try:
            groups.add(os.getpgid(p))
        except ProcessLookupError:
            pass
    for g in groups - {os.getpgid(0)}:
        try:
            os.killpg(g, signal.SIGKILL)
        except ProcessLookupError:
            pass


def run_isolated(path, timeout, html_dir=None, first_cell=False, slot=None):
    """Run one notebook in a child process; stop it past `timeout` seconds.

    Returns (status, seconds, output): the child's output is collected (in a file: a kernel
    left behind cannot hold it open), not printed, so that notebooks running side by side do
    not interleave their reports. Past the limit the child gets SIGTERM, on which it shuts its
    kernel down; whatever is left 30 s later is killed, kernels included."""
    cmd = [sys.executable, __file__, "run-one", str(path), "--cell-timeout", str(timeout)]
    if html_dir:
        cmd += ["--html-dir", str(html_dir)]
    if first_cell:
        cmd.append("--first-cell")
    env = dict(os.environ)
    if slot is not None:
        env["POSENC_EVCXR_SLOT"] = str(slot)  # read by scripts/evcxr-kernel
    start = time.monotonic()
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as out:
        proc = subprocess.Popen(cmd, start_new_session=True, env=env, stdout=out,
                                stderr=subprocess.STDOUT)
        try:
            proc.wait(timeout=timeout)
            status = "ok" if proc.returncode == 0 else "FAILED"
        except subprocess.TimeoutExpired:
            status = f"FAILED (timeout {timeout} s)"
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        # Nothing of this notebook may outlive it: the next one needs the warm build slot.
        kill_tree(proc.pid)
        proc.wait()
        out.seek(0)
        output = out.read()
    if status.startswith("FAILED (timeout"):
        output += f"FAILED {rel(path)}: ran past its time limit of {timeout} s\n"
    return status, time.monotonic() - start, output


# Wall times of the last run (longest first is the order that keeps both workers busy), and
# the committed times of a run on a fresh 2-core machine for a checkout that has not run them:
# in name order, the longest notebook (11) would start last and run alone.
TIMES_FILE = ROOT / "target" / "notebook-times.json"
DEFAULT_TIMES_FILE = ROOT / "scripts" / "notebook-times.json"


def schedule(paths, jobs):
    """Sorted order for one worker; longest first (last run's times) for several."""
    if jobs <= 1:
        return paths
    times = {}
    for path in (DEFAULT_TIMES_FILE, TIMES_FILE):
        try:
            times.update(json.loads(path.read_text()))
        except (OSError, ValueError):
            pass
    return sorted(paths, key=lambda p: -times.get(p.name, float("inf")))


def cmd_run(args):
    check_kernel()
    paths = notebook_paths(args.notebooks)
    if not paths:
        print("no notebooks found", file=sys.stderr)
        return 1
    jobs = max(1, min(args.jobs, len(paths)))
    order = schedule(paths, jobs)
    print(f"notebooks: {len(paths)} notebooks, {jobs} at a time, {args.timeout} s each at most",
          flush=True)
    results = {}
    lock = threading.Lock()
    total = time.monotonic()

    def one(path):
        status, seconds, output = run_isolated(path, args.timeout, args.html_dir)
        with lock:
            results[path] = (status, seconds)
            if status != "ok" and output.strip():
                print(output.rstrip(), flush=True)
            print(f"{status:<8} {seconds:7.1f} s  {rel(path)}", flush=True)

    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for f in [pool.submit(one, p) for p in order]:
            f.result()
    wall = time.monotonic() - total
    passed = sum(1 for s, _ in results.values() if s == "ok")
    failed = len(results) - passed
    try:
        times = json.loads(TIMES_FILE.read_text()) if TIMES_FILE.exists() else {}
    except ValueError:
        times = {}
    times.update({p.name: round(t, 1) for p, (_, t) in results.items()})
    TIMES_FILE.parent.mkdir(parents=True, exist_ok=True)
    TIMES_FILE.write_text(json.dumps(times, indent=1, sort_keys=True) + "\n")
    print(f"notebooks: {wall:.1f} s in all ({sum(t for _, t in results.values()):.1f} s of "
          f"notebook time, {jobs} at a time)", flush=True)
    for path in paths:
        if results[path][0] != "ok":
            print(f"failed: {rel(path)} ({results[path][0]})", flush=True)
    print(f"{passed} passed, {failed} failed", flush=True)
    return 0 if failed == 0 else 1


def build_inputs_digest(first_cell):
    """A digest of everything the notebooks' dependency build depends on: the crate's manifest,
    lock file and sources, the shared library the notebooks load it as (notebooks/dylib), the
    evcxr settings and kernel launcher, the first cell, and the tool versions."""
    h = hashlib.sha256()
    files = [ROOT / "Cargo.toml", ROOT / "Cargo.lock", NOTEBOOKS / "evcxr.toml",
             ROOT / "scripts" / "evcxr" / "init.evcxr", ROOT / "scripts" / "evcxr-kernel",
             NOTEBOOKS / "dylib" / "Cargo.toml"] + \
        sorted((ROOT / "src").rglob("*.rs")) + sorted((NOTEBOOKS / "dylib" / "src").rglob("*.rs"))
    for path in files:
        h.update(str(path.relative_to(ROOT)).encode() + b"\0")
        h.update(path.read_bytes() if path.exists() else b"(missing)")
    h.update(first_cell.encode())
    env = kernel_env()
    try:
        h.update(subprocess.run(["rustc", "-V"], capture_output=True, env=env).stdout)
    except OSError:
        h.update(b"(no rustc)")
    # evcxr_jupyter has no --version: its binary's size and time stand for it.
    evcxr = shutil.which("evcxr_jupyter", path=env["PATH"])
    if evcxr:
        st = os.stat(evcxr)
        h.update(f"{evcxr} {st.st_size} {st.st_mtime_ns}".encode())
    return h.hexdigest()


def cmd_prewarm(args):
    check_kernel()
    paths = notebook_paths(None)
    if not paths:
        print("prewarm: no notebooks", file=sys.stderr)
        return 1
    # A slot is skipped when its last successful prewarm built from the same inputs and its
    # build directory still exists (a second `make lab` starts JupyterLab at once). Slot 0
    # comes first (from nothing, it fills evcxr's artifact cache), then each further slot,
    # filled from that cache, so that every kernel running beside another finds a warm slot.
    base = Path(os.environ.get("POSENC_EVCXR_DIR", ROOT / ".evcxr"))
    digest = build_inputs_digest(first_code_cell(paths[0]))
    for slot in range(max(1, args.slots)):
        stamp = base / f"prewarmed-slot{slot}"
        if not args.force and (base / f"slot{slot}" / "target").is_dir() and stamp.exists() \
                and stamp.read_text().strip() == digest:
            print(f"prewarm: slot {slot}: the notebook dependencies are built (inputs unchanged; "
                  "--force rebuilds)", flush=True)
            continue
        stamp.unlink(missing_ok=True)
        print(f"prewarm: slot {slot}: building the notebook dependencies ({rel(paths[0])}, "
              "first cell)", flush=True)
        status, seconds, output = run_isolated(paths[0], args.timeout, first_cell=True,
                                               slot=slot)
        print(f"prewarm: slot {slot}: {status} in {seconds:.1f} s", flush=True)
        if status != "ok":
            print(output.rstrip(), flush=True)
            return 1
        stamp.write_text(digest + "\n")
    return 0


# ---------------------------------------------------------------------------------------------
# check-clean / strip (nbstripout)

# Cell ids stay: JupyterLab gives every new cell a random one and keeps it.
NBSTRIPOUT = [str(Path(sys.executable).with_name("nbstripout")), "--keep-id"]


# A code cell a reader takes in at a glance: at most this many lines, each at most this many
# characters wide (JupyterLab does not wrap code cells; the crate's rustfmt width is 100).
MAX_CELL_LINES = 25
MAX_LINE_CHARS = 100


def layout_problems(path):
    """Code cells over MAX_CELL_LINES lines and code lines over MAX_LINE_CHARS characters
    (the `:dep` lines that name the crate excepted), one message each."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    problems = []
    code_cells = (cell for cell in nb["cells"] if cell["cell_type"] == "code")
    for number, cell in enumerate(code_cells, start=1):
        lines = "".join(cell["source"]).split("\n")
        if len(lines) > MAX_CELL_LINES:
            problems.append(f"{rel(path)}: code cell {number} has {len(lines)} lines "
                            f"(at most {MAX_CELL_LINES})")
        for line_number, line in enumerate(lines, start=1):
            if len(line) > MAX_LINE_CHARS and not line.startswith(":dep"):
                problems.append(f"{rel(path)}: code cell {number}, line {line_number} has "
                                f"{len(line)} characters (at most {MAX_LINE_CHARS})")
    return problems


def cmd_check_clean(args):
    paths = notebook_paths(args.notebooks)
    proc = subprocess.run(NBSTRIPOUT + ["--verify"] + [str(p) for p in paths],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout + proc.stderr)
        print("check-clean: notebooks carry outputs or execution counts; clear them with: "
              "make notebooks-strip", file=sys.stderr)
        return 1
    problems = [problem for path in paths for problem in layout_problems(path)]
    if problems:
        sys.stderr.write("".join(problem + "\n" for problem in problems))
        print(f"check-clean: {len(problems)} code cells or lines too long", file=sys.stderr)
        return 1
    print(f"check-clean: {len(paths)} notebooks carry no outputs (nbstripout --verify); every "
          f"code cell has at most {MAX_CELL_LINES} lines of at most {MAX_LINE_CHARS} characters")
    return 0


def cmd_strip(args):
    paths = notebook_paths(args.notebooks)
    return subprocess.run(NBSTRIPOUT + [str(p) for p in paths]).returncode


# ---------------------------------------------------------------------------------------------
# timings


def first_code_cell(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            return "".join(cell["source"])
    raise SystemExit(f"{path}: no code cell")


def _comm(pid):
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


class Kernel:
    """A kernel started like JupyterLab starts it: in notebooks/, through our kernelspec."""

    def __init__(self, extra_env=None):
        from jupyter_client.manager import KernelManager

        env = kernel_env()
        env.update(extra_env or {})
        start = time.monotonic()
        self.km = KernelManager(kernel_name=KERNEL)
        self.km.start_kernel(cwd=str(NOTEBOOKS), env=env)
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=120)
        self.startup = time.monotonic() - start
        # evcxr_jupyter itself (below the launcher script): its embedded rust-analyzer runs in
        # its threads; cargo, rustc and the linker are its children
        launcher = self.km.provisioner.process.pid
        self.pid = next((p for p in [launcher] + descendants(launcher)
                         if _comm(p).startswith("evcxr_jupyter")), None)
        self.cpu = (0.0, 0.0)

    def cpu_seconds(self):
        """CPU seconds so far of the kernel process itself and of its finished children."""
        try:
            fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, TypeError):
            return (float("nan"), float("nan"))
        utime, stime, cutime, cstime = (int(f) / os.sysconf("SC_CLK_TCK") for f in fields[11:15])
        return (utime + stime, cutime + cstime)

    def run(self, code, timeout=3600):
        """Execute `code`; return (seconds, stderr text); raise on an error reply. Sets
        `self.cpu`: the CPU seconds the cell took in the kernel itself and in its children."""
        cpu_before = self.cpu_seconds()
        start = time.monotonic()
        errors = []
        stderr = []

        def hook(msg):
            kind = msg["header"]["msg_type"]
            if kind == "error":
                errors.append("\n".join(msg["content"].get("traceback", [])))
            elif kind == "stream" and msg["content"]["name"] == "stderr":
                stderr.append(msg["content"]["text"])

        reply = self.kc.execute_interactive(code, timeout=timeout, output_hook=hook)
        seconds = time.monotonic() - start
        self.cpu = tuple(after - before for after, before in zip(self.cpu_seconds(), cpu_before))
        if reply["content"]["status"] != "ok" or errors:
            raise RuntimeError(f"cell failed: {errors or reply['content']}")
        return seconds, "".join(stderr)

    def close(self):
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=False)


TYPICAL_CELL = """let pe = sinusoidal_table(128, 64)?;
let fig = heatmap(&pe).title("Sinusoidal table").x("dimension").y("position").colorbar("value");
fig"""


STATIC_DEP_CELL = """:dep posenc = { path = "..", features = ["notebook"] }
use posenc::notebook::prelude::*;"""


def compare_linking(dep_cell, cells):
    """New cells side by side in two kernels, alternating: one that depends on the crate as an
    rlib (every cell links polars, plotly and ndarray in statically) and one with the notebooks'
    first cell (`dep_cell`: the crate as the shared library of notebooks/dylib). Returns, for
    each, the median wall seconds and the median CPU seconds of cargo, rustc and the linker."""
    kernels = {}
    try:
        for name, first in (("posenc as an rlib (static)", STATIC_DEP_CELL),
                            ("notebooks/dylib (the notebooks' first cell)", dep_cell)):
            kernels[name] = Kernel()
            kernels[name].run(first)
        walls = {name: [] for name in kernels}
        cpus = {name: [] for name in kernels}
        for i in range(cells):
            for name, k in kernels.items():
                seconds, _ = k.run(f'check("cell {i}", 0.0, 1.0);')
                walls[name].append(seconds)
                cpus[name].append(k.cpu[1])
    finally:
        for k in kernels.values():
            k.close()
    return {name: (statistics.median(walls[name]), statistics.median(cpus[name]))
            for name in kernels}


def cmd_timings(args):
    check_kernel()
    dep_cell = first_code_cell(notebook_paths(None)[0])
    print("notebook timings (this machine: "
          f"{os.cpu_count()} cores); first cell:\n  " + dep_cell.replace("\n", "\n  "), flush=True)
    figures = {}
    if args.cold:
        # A fresh build directory: what a new machine pays.
        with tempfile.TemporaryDirectory() as tmp:
            k = Kernel({"POSENC_EVCXR_DIR": f"{tmp}/evcxr"})
            try:
                figures["cold first cell"], _ = k.run(dep_cell)
            finally:
                k.close()
        print(f"cold first cell (fresh machine): {figures['cold first cell']:.1f} s", flush=True)
    else:
        # Make sure the shared build directory is warm, as after `make lab`.
        k = Kernel()
        try:
            k.run(dep_cell)
        finally:
            k.close()
    k = Kernel()
    try:
        figures["kernel start"] = k.startup
        figures["warm first cell"], _ = k.run(dep_cell)
        first_cell_cpu = k.cpu
        k.run("use posenc::notebook::prelude::*;")
        figures["typical cell, first run"], _ = k.run(TYPICAL_CELL)
        typical_cpu = k.cpu
        reruns = [k.run(TYPICAL_CELL)[0] for _ in range(args.reruns)]
        figures["cell rerun (median)"] = statistics.median(reruns)
        figures["cell rerun (max)"] = max(reruns)
    finally:
        k.close()

    def cpu(split):
        return (f"CPU: the kernel itself (rust-analyzer) {split[0]:.1f} s, "
                f"cargo, rustc and the linker {split[1]:.1f} s")

    linking = compare_linking(dep_cell, args.cells) if args.cells > 0 else None

    print(f"kernel start: {figures['kernel start']:.1f} s", flush=True)
    print(f"first cell of another notebook, after one has run: {figures['warm first cell']:.1f} s "
          f"({cpu(first_cell_cpu)})", flush=True)
    print(f"first run of a typical cell (heatmap of a 128x64 table) in a new kernel: "
          f"{figures['typical cell, first run']:.1f} s ({cpu(typical_cpu)})", flush=True)
    print(f"rerun of that cell, {args.reruns} runs: median "
          f"{figures['cell rerun (median)']:.2f} s, max {figures['cell rerun (max)']:.2f} s",
          flush=True)
    if linking:
        for name, (wall, build_cpu) in linking.items():
            print(f"a new one-line cell, {args.cells} cells, against {name}: median {wall:.2f} s "
                  f"(cargo, rustc and the linker: median {build_cpu:.2f} s of CPU)", flush=True)
        (static_wall, static_cpu), (dylib_wall, dylib_cpu) = linking.values()
        print(f"  shared library / static: {dylib_wall / static_wall:.2f} of the time, "
              f"{dylib_cpu / static_cpu:.2f} of the build CPU", flush=True)
    if args.collection:
        start = time.monotonic()
        rc = cmd_run(argparse.Namespace(notebooks=None, timeout=args.timeout, html_dir=None,
                                        jobs=args.jobs))
        figures["collection"] = time.monotonic() - start
        print(f"whole collection ({len(notebook_paths(None))} notebooks, {args.jobs} at a time, "
              "warm): "
              f"{figures['collection']:.1f} s{'' if rc == 0 else ' (FAILURES)'}", flush=True)
    return 0


# ---------------------------------------------------------------------------------------------


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    timeout = int(os.environ.get("NOTEBOOK_TIMEOUT", "600"))
    jobs = int(os.environ.get("NOTEBOOK_JOBS", "1"))

    p = sub.add_parser("run", help="execute notebooks with fresh kernels")
    p.add_argument("notebooks", nargs="*")
    p.add_argument("--timeout", type=int, default=timeout,
                   help="seconds per notebook (default: $NOTEBOOK_TIMEOUT or 600)")
    p.add_argument("--html-dir", help="also write each executed notebook as HTML here")
    p.add_argument("--jobs", type=int, default=jobs,
                   help="notebooks executed at once, each in its own build slot "
                        "(default: $NOTEBOOK_JOBS or 1)")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("run-one", help=argparse.SUPPRESS)
    p.add_argument("notebook")
    p.add_argument("--cell-timeout", type=int, default=timeout)
    p.add_argument("--html-dir")
    p.add_argument("--first-cell", action="store_true")
    p.set_defaults(func=cmd_run_one)

    p = sub.add_parser("prewarm", help="build the notebook dependencies once")
    p.add_argument("--timeout", type=int, default=int(os.environ.get("PREWARM_TIMEOUT", "2400")))
    p.add_argument("--force", action="store_true", help="build even if nothing changed")
    p.add_argument("--slots", type=int, default=1,
                   help="build slots to fill, one per notebook run at once (default 1)")
    p.set_defaults(func=cmd_prewarm)

    p = sub.add_parser("check-clean",
                       help="fail if notebooks carry outputs or code cells or lines too long")
    p.add_argument("notebooks", nargs="*")
    p.set_defaults(func=cmd_check_clean)

    p = sub.add_parser("strip", help="remove outputs in place")
    p.add_argument("notebooks", nargs="*")
    p.set_defaults(func=cmd_strip)

    p = sub.add_parser("timings", help="measure the performance figures of docs/performance.md")
    p.add_argument("--cold", action="store_true",
                   help="also build from nothing in a temporary directory (minutes)")
    p.add_argument("--collection", action="store_true",
                   help="also execute the whole collection, as `make test` does")
    p.add_argument("--reruns", type=int, default=5)
    p.add_argument("--cells", type=int, default=10,
                   help="new cells to time against the crate linked statically and as the "
                        "notebooks' shared library, side by side (0: skip)")
    p.add_argument("--jobs", type=int, default=jobs, help="notebooks at once for --collection")
    p.add_argument("--timeout", type=int, default=timeout)
    p.set_defaults(func=cmd_timings)

    args = parser.parse_args()
    sys.exit(args.func(args))


if __name__ == "__main__":
    main()
