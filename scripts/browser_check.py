"""Prove in a real browser that the notebooks' figures draw offline (see scripts/browser-check).

One headless Chromium (Debian's, driven by Playwright for Python), with every request that
leaves the machine refused and reported:

- each exported HTML page (`make html`): every figure became an SVG with data traces, no
  formula failed to render (KaTeX, embedded by the export template), no script error, and no
  request to the network;
- each notebook given after --lab: JupyterLab is started by scripts/lab exactly as `make lab`
  starts it, opens the notebook (no news prompt may appear), runs Run ▸ Run All Cells with the
  Rust kernel, and every cell must run without error or stderr, every figure draw in JupyterLab
  and every DataFrame become an HTML table. Autosave is off, so the committed notebook keeps no
  outputs. A kernel that is not idle 90 s after opening gets one second opening, with a
  warning; any failure leaves a screenshot and the server's log.

Screenshots go to target/notebook-screenshots/.
"""

import argparse
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import sync_playwright

from notebooks import ALLOW_STDERR_TAG, NOTEBOOKS, ROOT

SHOTS = ROOT / "target" / "notebook-screenshots"
PLOTLY_MIME = "application/vnd.plotly.v1+json"
NEWS_PROMPT = "Would you like to get notified about official Jupyter news?"

# JupyterLab settings for the check only: no autosave (the committed notebook must keep no
# outputs) and every cell attached to the page (no windowing), so every output can be counted.
# The news prompt is left to what scripts/lab configures, so that the check sees what a user sees.
LAB_SETTINGS = {
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}


def chromium_path():
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        raise SystemExit("browser-check: chromium not found (scripts/setup browser)")
    return path


class Browser:
    """Headless Chromium with one page; requests outside `allowed` prefixes are refused."""

    def __init__(self, playwright, allowed=("file://",)):
        self.allowed = list(allowed)
        self.blocked = []
        self.page_errors = []
        # Debian's chromium runs from its own wrapper script; Playwright talks to it over CDP.
        self.browser = playwright.chromium.launch(
            executable_path=chromium_path(), headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                  "--disable-background-networking", "--disable-component-update",
                  "--no-first-run", "--disable-quic"])
        self.context = self.browser.new_context(viewport={"width": 1280, "height": 1600},
                                                service_workers="block")
        self.context.route("**/*", self._route)
        self.page = self.context.new_page()
        self.page.on("pageerror", lambda e: self.page_errors.append(str(e)))

    def _route(self, route):
        url = route.request.url
        if any(url.startswith(p) for p in self.allowed) or url.startswith("data:"):
            route.continue_()
        else:
            self.blocked.append(url)
            route.abort("internetdisconnected")

    def close(self):
        self.context.close()
        self.browser.close()


# ---------------------------------------------------------------------------------------------
# Exported HTML

# Per figure: drawn as an SVG, and how many data traces (scatter lines, heatmaps, bars).
FIGURES_JS = """() => Array.from(document.querySelectorAll('.plotly-graph-div')).map(d => ({
    svgs: d.querySelectorAll('.main-svg').length,
    traces: d.querySelectorAll('g.trace.scatter, g.hm, g.trace.bars, g.bars').length,
}))"""


def check_page(browser, page_path):
    page_path = Path(page_path).resolve()
    name = page_path.stem
    if not page_path.is_file():
        print(f"browser-check: FAILED {name}: {page_path} is missing (make html)", flush=True)
        return False
    browser.blocked.clear()
    browser.page_errors.clear()
    page = browser.page
    page.goto(page_path.as_uri(), wait_until="load")
    try:
        page.wait_for_function(
            f"() => ({FIGURES_JS})().every(f => f.svgs > 0 && f.traces > 0)", timeout=30_000)
    except PlaywrightError:
        pass  # judged below, figure by figure
    figures = page.evaluate(FIGURES_JS)
    formulas = page.locator("math").count()
    bad_formulas = page.locator(".katex-error").count()
    shot = SHOTS / f"{name}.png"
    page.screenshot(path=str(shot), full_page=True)
    undrawn = [i for i, f in enumerate(figures, 1) if not (f["svgs"] and f["traces"])]
    failures = []
    if not figures:
        failures.append("no figure on the page")
    if undrawn:
        failures.append(f"figures {undrawn} of {len(figures)} not drawn")
    if bad_formulas:
        failures.append(f"{bad_formulas} formulas failed to render ({formulas} rendered)")
    failures += [f"request to the network: {u}" for u in browser.blocked]
    failures += [f"script error: {e}" for e in browser.page_errors]
    traces = sum(f["traces"] for f in figures)
    if failures:
        print(f"browser-check: FAILED {name}: " + "; ".join(failures), flush=True)
        return False
    print(f"browser-check: ok     {name}: {len(figures)} figures drawn ({traces} traces), "
          f"{formulas} formulas, no network request; screenshot {shot.relative_to(ROOT)}",
          flush=True)
    return True


# ---------------------------------------------------------------------------------------------
# JupyterLab


def panel_js(name):
    """A page expression for the open notebook panel of `name` (undefined until it is open)."""
    return ("Array.from(window.jupyterapp.shell.widgets('main'))"
            f".find(w => w.context && w.context.path === {json.dumps(name)})")


# The open notebook, its kernel, and for every code cell what it printed and what was drawn.
SUMMARY_JS = r"""
(() => {
  if (!window.jupyterapp) return {state: 'loading'};
  const panel = %PANEL%;
  if (!panel || !panel.content || !panel.sessionContext || !panel.context)
    return {state: 'no notebook'};
  const sc = panel.sessionContext;
  const kernel = sc.session && sc.session.kernel;
  const cells = panel.content.widgets.filter(c => c.model.type === 'code').map(c => {
    const outputs = c.model.outputs.toJSON();
    const area = c.node.querySelector('.jp-OutputArea');
    const count = sel => area ? area.querySelectorAll(sel).length : 0;
    return {
      count: c.model.executionCount,
      tags: c.model.getMetadata('tags') || [],
      errors: outputs.filter(o => o.output_type === 'error')
        .map(o => `${o.ename}: ${o.evalue}\n${(o.traceback || []).join('\n')}`),
      stderr: outputs.filter(o => o.output_type === 'stream' && o.name === 'stderr')
        .map(o => Array.isArray(o.text) ? o.text.join('') : o.text),
      mimes: outputs.flatMap(o => o.data ? Object.keys(o.data) : []),
      html_tables: outputs.filter(o => o.data && !o.data['%PLOTLY%'] &&
        String(o.data['text/html'] || '').includes('<table')).length,
      svgs: count('.main-svg'),
      traces: count('g.trace, g.hm'),
      tables: count('table'),
    };
  });
  return {
    state: 'open', path: panel.context.path,
    kernel: kernel ? kernel.name : null,
    status: kernel ? kernel.status : 'no kernel',
    cells,
  };
})()
""".replace("%PLOTLY%", PLOTLY_MIME)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what, probe, timeout, interval=0.5):
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def http_ok(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.read() if r.status == 200 else None
    except OSError:
        return None


# Characters of the server's log printed when something fails (its end).
LOG_TAIL = 6000


class Lab:
    """JupyterLab on notebooks/, started by scripts/lab."""

    def __init__(self, tmp):
        self.port = free_port()
        self.token = secrets.token_hex(16)
        settings = Path(tmp) / "settings"
        for name, values in LAB_SETTINGS.items():
            path = settings / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(values))
        env = dict(os.environ, PORT=str(self.port), JUPYTER_TOKEN=self.token, NO_BROWSER="1",
                   JUPYTERLAB_SETTINGS_DIR=str(settings),
                   JUPYTERLAB_WORKSPACES_DIR=str(Path(tmp) / "workspaces"))
        self.log = open(Path(tmp) / "lab.log", "w+")
        self.proc = subprocess.Popen(
            [str(ROOT / "scripts" / "lab"), "--LabApp.expose_app_in_browser=True"],
            env=env, stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT,
            start_new_session=True)
        start = time.monotonic()
        wait_for("JupyterLab to answer", lambda: self.proc.poll() is not None or
                 http_ok(f"{self.base}/api/status?token={self.token}"), 180)
        if self.proc.poll() is not None:
            raise RuntimeError(f"JupyterLab exited:\n{self.log_text()}")
        self.startup = time.monotonic() - start

    @property
    def base(self):
        return f"http://127.0.0.1:{self.port}"

    def url(self, notebook):
        return f"{self.base}/lab/tree/{notebook}?token={self.token}"

    def log_text(self, chars=LOG_TAIL):
        """The end of the server's log, without the server's repeated "Nudge: attempt N" lines
        (one every 0.5 s while a kernel does not answer), which would push out the rest."""
        self.log.flush()
        self.log.seek(0)
        lines = [line for line in self.log if "Nudge: attempt" not in line]
        return "".join(lines)[-chars:] if chars else "".join(lines)

    def shutdown_sessions(self, notebook):
        """Shut down (REST API) every session of `notebook`, and with it the session's kernel,
        as closing the notebook and shutting its kernel down in JupyterLab does."""
        url = f"{self.base}/api/sessions?token={self.token}"
        with urllib.request.urlopen(url, timeout=30) as r:
            sessions = json.load(r)
        for session in sessions:
            if session.get("path") == notebook:
                request = urllib.request.Request(
                    f"{self.base}/api/sessions/{session['id']}?token={self.token}",
                    method="DELETE")
                with urllib.request.urlopen(request, timeout=60):
                    pass

    def stop(self):
        if self.proc.poll() is None:
            # SIGTERM stops the server and shuts its kernels down (a double SIGINT with no
            # terminal on stdin exits without shutting them down).
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()


def describe_state(s):
    """One line for a SUMMARY_JS result: page state, kernel and its status, cells run."""
    if not s:
        return "nothing (the page never answered)"
    if s["state"] != "open":
        return f"page state {s['state']!r}"
    ran = sum(c["count"] is not None for c in s["cells"])
    return (f"notebook open, kernel {s['kernel']!r} {s['status']!r}, "
            f"{ran} of {len(s['cells'])} code cells run")


def report_lab_failure(lab, browser, name, label="failure"):
    """What a failure inside JupyterLab leaves to diagnose it: a screenshot of the page, the
    page's script errors and refused requests, and the server's log (which holds the kernels'
    stderr): its end printed, the whole of it saved beside the screenshot."""
    shot = SHOTS / f"lab-{Path(name).stem}-{label}.png"
    log = shot.with_suffix(".log")
    text = lab.log_text(chars=None)
    log.write_text(text)
    print(f"browser-check:   JupyterLab log {log.relative_to(ROOT)}", flush=True)
    try:
        browser.page.screenshot(path=str(shot))
        print(f"browser-check:   screenshot {shot.relative_to(ROOT)}", flush=True)
    except PlaywrightError as e:
        print(f"browser-check:   no screenshot: {e}", flush=True)
    for e in browser.page_errors:
        print(f"browser-check:   page error: {e}", flush=True)
    for u in browser.blocked:
        print(f"browser-check:   refused request: {u}", flush=True)
    print(f"browser-check:   JupyterLab log (its end):\n{text[-LOG_TAIL:]}", flush=True)


# Seconds to wait for an opened notebook's kernel to be idle. It takes 12-19 s with the build
# slot prewarmed, as the check runs; past this the kernel is taken to be stuck.
KERNEL_IDLE_PATIENCE = 90


def open_with_idle_kernel(lab, browser, name, summary):
    """Open `name` in JupyterLab and wait until its kernel is idle; returns the summary, the
    seconds it took and whether a second opening was needed.

    Rarely (once in about 25 checks, never reproduced on demand) the kernel stays "unknown"
    after opening: the page shows "Connecting" and the server never hears from the kernel. A
    user would close the notebook, shut its kernel down and open it again; the check does the
    same, once, after printing a warning with what it saw (screenshot and server log saved as
    lab-<notebook>-stuck.*). A second stuck kernel fails the check."""
    start = time.monotonic()
    for opening in (1, 2):
        browser.page_errors.clear()
        browser.page.goto(lab.url(name))
        seen = {}

        def open_and_idle():
            seen["last"] = s = summary()
            return s if s["state"] == "open" and s["status"] == "idle" else None

        try:
            s = wait_for(f"{name} to open with an idle kernel", open_and_idle,
                         KERNEL_IDLE_PATIENCE)
            return s, time.monotonic() - start, opening > 1
        except TimeoutError as e:
            message = f"{e} (last seen: {describe_state(seen.get('last'))})"
            if opening > 1:
                raise TimeoutError(message) from None
        print(f"browser-check: WARNING {message}; shutting its session down and opening it "
              "again", flush=True)
        report_lab_failure(lab, browser, name, label="stuck")
        lab.shutdown_sessions(name)


def check_notebook(lab, browser, name, timeout):
    """Open `name` in JupyterLab, run all cells, and judge what came out; returns failures."""
    page = browser.page
    summary = lambda: page.evaluate(SUMMARY_JS.replace("%PANEL%", panel_js(name)))  # noqa: E731
    s, kernel_ready, retried = open_with_idle_kernel(lab, browser, name, summary)
    print(f"browser-check: {name} open in JupyterLab, kernel {s['kernel']!r} idle after "
          f"{kernel_ready:.1f} s{' (second opening)' if retried else ''}", flush=True)
    failures = []
    # JupyterLab asks this once the app is restored, before the kernel is idle.
    if page.get_by_text(NEWS_PROMPT).count():
        failures.append(f"JupyterLab asks {NEWS_PROMPT!r} (scripts/lab should answer it)")

    start = time.monotonic()
    # Run ▸ Run All Cells on this notebook's panel.
    page.evaluate(f"window.jupyterapp.shell.activateById(({panel_js(name)}).id);"
                  "void window.jupyterapp.commands.execute('notebook:run-all-cells')")

    def finished():
        s = summary()
        if any(c["errors"] for c in s["cells"]):
            return s  # JupyterLab stops at the first error
        if s["status"] == "idle" and all(c["count"] is not None for c in s["cells"]):
            return s
        return None

    s = wait_for(f"{name} to run", finished, timeout, interval=1.0)
    ran = time.monotonic() - start
    # Figures are drawn by JupyterLab's plotly renderer after the output arrives.
    figure_cells = [i for i, c in enumerate(s["cells"]) if PLOTLY_MIME in c["mimes"]]
    try:
        s = wait_for("figures to draw", lambda: (lambda s: s if all(
            s["cells"][i]["svgs"] and s["cells"][i]["traces"] for i in figure_cells) else None)(
                summary()), 30)
    except TimeoutError:
        s = summary()

    stopped_by_error = any(c["errors"] for c in s["cells"])
    for i, c in enumerate(s["cells"], 1):
        failures += [f"code cell {i}: error {e}" for e in c["errors"]]
        if ALLOW_STDERR_TAG not in c["tags"]:
            failures += [f"code cell {i}: stderr {t.strip()[:300]}" for t in c["stderr"]]
        if c["count"] is None and not stopped_by_error:
            failures.append(f"code cell {i}: not executed")
        if PLOTLY_MIME in c["mimes"] and not (c["svgs"] and c["traces"]):
            failures.append(f"code cell {i}: figure not drawn ({c['svgs']} svg, {c['traces']} traces)")
        if c["html_tables"] and c["tables"] < c["html_tables"]:
            failures.append(f"code cell {i}: DataFrame not rendered as an HTML table")
    failures += [f"request to the network: {u}" for u in browser.blocked]
    browser.blocked.clear()
    figures = sum(1 for c in s["cells"] if PLOTLY_MIME in c["mimes"] and c["svgs"])
    traces = sum(c["traces"] for c in s["cells"])
    tables = sum(1 for c in s["cells"] if c["html_tables"] and c["tables"])

    stem = Path(name).stem
    shots = []
    for label, index in (("figure", figure_cells[:1]), ("table", [
            i for i, c in enumerate(s["cells"]) if c["html_tables"]][-1:])):
        for i in index:
            page.evaluate(f"({panel_js(name)}).content.widgets"
                          f".filter(c => c.model.type === 'code')[{i}].node.scrollIntoView()")
            page.wait_for_timeout(500)
            shot = SHOTS / f"lab-{stem}-{label}.png"
            page.screenshot(path=str(shot))
            shots.append(str(shot.relative_to(ROOT)))

    verdict = "ok    " if not failures else "FAILED"
    print(f"browser-check: {verdict} {name} in JupyterLab: {len(s['cells'])} code cells run in "
          f"{ran:.1f} s; {figures} figures drawn ({traces} traces), {tables} HTML tables; "
          f"screenshots {', '.join(shots) or 'none'}", flush=True)
    for f in failures:
        print(f"browser-check:   {f}", flush=True)
    # Shut the kernel down (and wait for it), so its build slot is free for the next notebook.
    page.evaluate(f"({panel_js(name)}).sessionContext.shutdown().then(() => 'done')")
    return failures


def check_lab(browser, notebooks, timeout):
    originals = {n: (NOTEBOOKS / n).read_bytes() for n in notebooks}
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        lab = Lab(tmp)
        print(f"browser-check: JupyterLab answering on 127.0.0.1:{lab.port} after "
              f"{lab.startup:.1f} s", flush=True)
        browser.allowed.append(f"{lab.base}/")
        try:
            for name in notebooks:
                try:
                    failed |= bool(check_notebook(lab, browser, name, timeout))
                except (OSError, PlaywrightError) as e:  # TimeoutError is an OSError
                    print(f"browser-check: FAILED {name} in JupyterLab: {e}", flush=True)
                    report_lab_failure(lab, browser, name)
                    failed = True
        except Exception:
            print(f"browser-check: JupyterLab log:\n{lab.log_text()}", file=sys.stderr)
            raise
        finally:
            lab.stop()
    for name, data in originals.items():
        if (NOTEBOOKS / name).read_bytes() != data:
            print(f"browser-check: FAILED {name} was modified on disk", flush=True)
            failed = True
    return not failed


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("pages", nargs="*", help="exported HTML pages to check")
    parser.add_argument("--lab", nargs="+", default=[], metavar="NOTEBOOK",
                        help="notebooks (names in notebooks/) to run inside JupyterLab")
    parser.add_argument("--timeout", type=int,
                        default=int(os.environ.get("NOTEBOOK_TIMEOUT", "600")),
                        help="seconds to run one notebook in JupyterLab")
    args = parser.parse_args()
    if not args.pages and not args.lab:
        parser.error("nothing to check: give HTML pages and/or --lab NOTEBOOK...")
    SHOTS.mkdir(parents=True, exist_ok=True)
    ok = True
    with sync_playwright() as playwright:
        browser = Browser(playwright)
        try:
            for page in args.pages:
                ok &= check_page(browser, page)
            if args.lab:
                ok &= check_lab(browser, args.lab, args.timeout)
        finally:
            browser.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
