"""Run notebooks inside a real JupyterLab, driven through headless Chromium (see scripts/lab-check).

JupyterLab is started by scripts/lab, as `make lab` starts it, on a free port with a token of
our own and the app exposed as `window.jupyterapp`; Chromium is driven over the DevTools
protocol (websocket-client, already in .venv). Everything runs on 127.0.0.1 and Chromium's
proxy points nowhere, so a notebook that needed the internet would fail here.
"""

import argparse
import base64
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

import websocket

from notebooks import ALLOW_STDERR_TAG, NOTEBOOKS, ROOT

SHOTS = ROOT / "target" / "notebook-screenshots"
PLOTLY_MIME = "application/vnd.plotly.v1+json"

# JupyterLab settings for the check only: no autosave (the committed notebook must keep no
# outputs) and every cell attached to the page (no windowing), so every output can be counted.
LAB_SETTINGS = {
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false"},
}



def panel_js(name):
    """A page expression for the open notebook panel of `name` (undefined until it is open)."""
    return ("Array.from(window.jupyterapp.shell.widgets('main'))"
            f".find(w => w.context && w.context.path === {json.dumps(name)})")


# The open notebook, its kernel, and for every code cell what it printed and what was drawn.
SUMMARY_JS = r"""
(() => {
  if (!window.jupyterapp) return JSON.stringify({state: 'loading'});
  const panel = %PANEL%;
  if (!panel || !panel.content || !panel.sessionContext || !panel.context)
    return JSON.stringify({state: 'no notebook'});
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
  return JSON.stringify({
    state: 'open', path: panel.context.path,
    kernel: kernel ? kernel.name : null,
    status: kernel ? kernel.status : 'no kernel',
    cells,
  });
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

    def log_text(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()[-4000:]

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


class Chromium:
    """Headless Chromium with a DevTools websocket on its one page."""

    def __init__(self, tmp):
        browser = shutil.which("chromium") or shutil.which("chromium-browser") or \
            shutil.which("google-chrome")
        if not browser:
            raise SystemExit("lab-check: chromium not found (scripts/setup browser)")
        profile = Path(tmp) / "chromium"
        self.proc = subprocess.Popen(
            [browser, "--headless", "--no-sandbox", "--disable-gpu",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--disable-dev-shm-usage", "--no-first-run", "--disable-quic",
             # Only loopback is reachable: any request to the internet fails.
             "--proxy-server=127.0.0.1:9", "--remote-debugging-port=0",
             "--remote-allow-origins=*", f"--user-data-dir={profile}",
             "--window-size=1280,1600", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        port_file = profile / "DevToolsActivePort"
        port = wait_for("Chromium's DevTools port", lambda: port_file.exists() and
                        port_file.read_text().split("\n")[0].strip(), 60)
        targets = json.loads(wait_for("Chromium's page list",
                                      lambda: http_ok(f"http://127.0.0.1:{port}/json/list"), 30))
        page = next(t for t in targets if t["type"] == "page")
        self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=120)
        self.next_id = 0

    def call(self, method, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg["result"]

    def evaluate(self, expression, await_promise=False):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True,
                           awaitPromise=await_promise)
        if "exceptionDetails" in result:
            raise RuntimeError(f"page script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, path):
        data = self.call("Page.captureScreenshot", format="png")["data"]
        path.write_bytes(base64.b64decode(data))

    def stop(self):
        try:
            self.ws.close()
        finally:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def summary(browser, name):
    return json.loads(browser.evaluate(SUMMARY_JS.replace("%PANEL%", panel_js(name))))


def check_notebook(lab, browser, name, timeout):
    """Open `name` in JupyterLab, run all cells, and judge what came out; returns failures."""
    start = time.monotonic()
    browser.call("Page.navigate", url=lab.url(name))
    s = wait_for(f"{name} to open with an idle kernel", lambda: (
        lambda s: s if s["state"] == "open" and s["status"] == "idle" else None)(summary(browser, name)),
        180)
    kernel_ready = time.monotonic() - start
    print(f"lab-check: {name} open in JupyterLab, kernel {s['kernel']!r} idle after "
          f"{kernel_ready:.1f} s", flush=True)

    start = time.monotonic()
    # Run ▸ Run All Cells on this notebook's panel.
    browser.evaluate(f"window.jupyterapp.shell.activateById(({panel_js(name)}).id);"
                     "void window.jupyterapp.commands.execute('notebook:run-all-cells')")

    def finished():
        s = summary(browser, name)
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
                summary(browser, name)), 30)
    except TimeoutError:
        s = summary(browser, name)

    failures = []
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
    figures = sum(1 for c in s["cells"] if PLOTLY_MIME in c["mimes"] and c["svgs"])
    traces = sum(c["traces"] for c in s["cells"])
    tables = sum(1 for c in s["cells"] if c["html_tables"] and c["tables"])

    SHOTS.mkdir(parents=True, exist_ok=True)
    stem = Path(name).stem
    shots = []
    for label, index in (("figure", figure_cells[:1]), ("table", [
            i for i, c in enumerate(s["cells"]) if c["html_tables"]][-1:])):
        for i in index:
            browser.evaluate(f"({panel_js(name)}).content.widgets"
                             f".filter(c => c.model.type === 'code')[{i}].node.scrollIntoView()")
            time.sleep(0.5)
            shot = SHOTS / f"lab-{stem}-{label}.png"
            browser.screenshot(shot)
            shots.append(str(shot.relative_to(ROOT)))

    verdict = "ok    " if not failures else "FAILED"
    print(f"lab-check: {verdict} {name}: {len(s['cells'])} code cells run in {ran:.1f} s; "
          f"{figures} figures drawn ({traces} traces), {tables} HTML tables; screenshots "
          f"{', '.join(shots) or 'none'}", flush=True)
    for f in failures:
        print(f"lab-check:   {f}", flush=True)
    # Shut the kernel down (and wait for it), so its build slot is free for the next notebook.
    browser.evaluate(f"({panel_js(name)}).sessionContext.shutdown()"
                     ".then(() => 'done')", await_promise=True)
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("notebooks", nargs="*", default=["00_quickstart.ipynb"])
    parser.add_argument("--timeout", type=int, default=int(os.environ.get("NOTEBOOK_TIMEOUT", "600")),
                        help="seconds to run one notebook")
    args = parser.parse_args()

    originals = {n: (NOTEBOOKS / n).read_bytes() for n in args.notebooks}
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        lab = Lab(tmp)
        print(f"lab-check: JupyterLab answering on 127.0.0.1:{lab.port} after "
              f"{lab.startup:.1f} s", flush=True)
        browser = None
        try:
            browser = Chromium(tmp)
            for name in args.notebooks:
                try:
                    failed |= bool(check_notebook(lab, browser, name, args.timeout))
                except (TimeoutError, RuntimeError) as e:
                    print(f"lab-check: FAILED {name}: {e}", flush=True)
                    failed = True
        except Exception:
            print(f"lab-check: JupyterLab log:\n{lab.log_text()}", file=sys.stderr)
            raise
        finally:
            if browser:
                browser.stop()
            lab.stop()
    for name, data in originals.items():
        if (NOTEBOOKS / name).read_bytes() != data:
            print(f"lab-check: FAILED {name} was modified on disk", flush=True)
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
