"""The harness of the browser benches (`pages`, `sessions`): Streamlit servers in their own process
groups, the floor page (a bare script drawing one plotly chart of a Metrics panel's size), and one
visit of a page by Chromium (through Playwright) in a fresh browser context.

A visit is timed by a probe the page gets before its own scripts: a MutationObserver that sees the
first drawn chart (a `.js-plotly-plot` whose SVG holds a scatter trace with a drawn line path) or
table (a data grid canvas with a size), timed at the next animation frame from the navigation's
start (`performance.now()`), with the websocket messages (and bytes) received by then.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
VIEWPORT = {"width": 1600, "height": 1000}

# The probe: installed before the page's own scripts (Playwright's init script). `__WANT__` is
# "chart" or "table". Everything is timed with performance.now(): ms since the navigation started.
PROBE_JS = r"""
(() => {
  const WANT = __WANT__;
  const probe = window.__rdProbe = {done: false, ws: [], error: null, first_fig_ws: null};
  const decoder = new TextDecoder('utf-8');
  const Native = window.WebSocket;
  class CountingWebSocket extends Native {
    constructor(...args) {
      super(...args);
      this.addEventListener('message', (ev) => {
        const d = ev.data, t = performance.now();
        probe.ws.push([t, (d && (d.byteLength ?? d.size ?? d.length)) || 0]);
        if (probe.first_fig_ws == null && d instanceof ArrayBuffer
            && decoder.decode(new Uint8Array(d)).includes('"type":"scatter"')) probe.first_fig_ws = t;
      });
    }
  }
  window.WebSocket = CountingWebSocket;
  const traced = (el) => Array.from(el.querySelectorAll('svg.main-svg .scatterlayer .trace path.js-line'))
      .some((p) => (p.getAttribute('d') || '').length > 1);
  const drawnCharts = () => Array.from(document.querySelectorAll('.js-plotly-plot')).filter(traced);
  const table = () => Array.from(document.querySelectorAll('[data-testid="stDataFrame"] canvas'))
      .find((c) => c.width > 0 && c.height > 0 && c.getBoundingClientRect().height > 0);
  const size = (el) => {
    const data = (el && el._fullData) || [];
    const lens = data.map((t) => (t.x && t.x.length) || 0);
    return {traces: data.length, points: lens.reduce((a, b) => a + b, 0), max_points: Math.max(0, ...lens)};
  };
  probe.drawnCharts = () => drawnCharts().length;
  probe.charts = () => document.querySelectorAll('[data-testid="stPlotlyChart"]').length;
  const check = () => {
    if (probe.found) return;
    const exc = document.querySelector('[data-testid="stException"]');
    if (exc) {
      probe.found = true; probe.error = (exc.innerText || 'exception').slice(0, 800); probe.done = true;
      return;
    }
    const el = WANT === 'table' ? table() : drawnCharts()[0];
    if (!el) return;
    probe.found = true;
    probe.t_found = performance.now();
    requestAnimationFrame(() => {
      probe.t = performance.now();
      probe.ws_messages = probe.ws.length;
      probe.ws_bytes = probe.ws.reduce((a, m) => a + m[1], 0);
      probe.first_ws = probe.ws.length ? probe.ws[0][0] : null;
      probe.charts_then = probe.charts();
      probe.drawn_then = probe.drawnCharts();
      probe.first_chart = WANT === 'table' ? null : size(el);
      const nav = performance.getEntriesByType('navigation')[0];
      probe.html = nav ? nav.responseEnd : null;
      probe.dom = nav ? nav.domContentLoadedEventEnd : null;
      probe.done = true;
    });
  };
  const start = () => {
    new MutationObserver(check).observe(document.documentElement || document,
        {childList: true, subtree: true, attributes: true, attributeFilter: ['d', 'width', 'height']});
    setInterval(check, 50);  // canvas sizes and late attributes the observer may not report
  };
  if (document.documentElement) start(); else document.addEventListener('readystatechange', start, {once: true});
})();
"""

FLOOR_SCRIPT = '''\
"""The floor: a bare Streamlit page that draws one plotly chart of a Metrics panel's size."""
import numpy as np
import plotly.graph_objects as go
import streamlit as st

POINTS, TRACES = {points}, {traces}
st.set_page_config(page_title="floor", layout="wide")
rng = np.random.default_rng(0)
x = np.arange(POINTS)
fig = go.Figure(layout={{"title": {{"text": "floor", "font": {{"size": 13}}}}, "hovermode": "x unified",
                        "height": 300, "margin": {{"l": 10, "r": 10, "t": 40, "b": 60}},
                        "legend": {{"orientation": "h", "font": {{"size": 10}}}}}})
for i in range(TRACES):
    fig.add_scatter(x=x, y=np.cumsum(rng.normal(size=POINTS)), mode="lines", name=f"series {{i}}",
                    line={{"width": 1.8}})
left, _ = st.columns(2)
with left:
    st.plotly_chart(fig, width="stretch", config={{"displaylogo": False}})
'''


# Servers -------------------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Server:
    """`streamlit run SCRIPT` in its own process group, its output in `log`."""
    name: str
    script: Path
    cwd: Path
    log: Path
    args: list[str] = field(default_factory=list)
    env: dict = field(default_factory=dict)
    port: int = 0
    proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Server:
        self.port = free_port()
        cmd = [sys.executable, "-m", "streamlit", "run", str(self.script), "--server.port", str(self.port),
               "--server.address", "127.0.0.1", "--server.headless", "true", "--server.fileWatcherType", "none",
               "--browser.gatherUsageStats", "false", *(["--", *self.args] if self.args else [])]
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(cmd, cwd=self.cwd, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        return self

    def wait_healthy(self, timeout: float = 90.0) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                if urllib.request.urlopen(self.url + "/_stcore/health", timeout=1).read() == b"ok":
                    return
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"the {self.name} server did not start; its output:\n{self.tail()}")

    def tail(self, n: int = 4000) -> str:
        try:
            return self.log.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
            try:
                os.killpg(self.proc.pid, sig)  # the group this server leads (start_new_session)
            except ProcessLookupError:
                return
            try:
                self.proc.wait(wait)
                return
            except subprocess.TimeoutExpired:
                continue


def app_dir() -> Path:
    """The checkout (or share/rundash) holding app.py, pages/ and .streamlit/config.toml."""
    from rundash_core.serve.cli import app_path
    return app_path().parent


def server_env(cache_dir: Path) -> dict:
    env = {**os.environ, "RUNDASH_CACHE_DIR": str(cache_dir)}
    for k in ("RUNDASH_DIRS", "RUNDASH_ROOTS"):
        env.pop(k, None)
    return env


def write_floor(folder: Path, points: int, traces: int) -> Path:
    """The floor script, with the app's Streamlit config (theme, settings) beside it."""
    folder.mkdir(parents=True, exist_ok=True)
    config = app_dir() / ".streamlit" / "config.toml"
    if config.is_file():
        (folder / ".streamlit").mkdir(exist_ok=True)
        shutil.copy(config, folder / ".streamlit" / "config.toml")
    script = folder / "floor.py"
    script.write_text(FLOOR_SCRIPT.format(points=int(points), traces=int(traces)))
    return script


# One visit -----------------------------------------------------------------------------------------
def visit(browser, url: str, want: str, *, timeout_s: float, settle_s: float) -> dict:
    """Open `url` in a fresh browser context; seconds from the navigation's start to the first chart
    (or table) drawn, and what the page had received and drawn by then."""
    ctx = browser.new_context(viewport=VIEWPORT)
    try:
        ctx.add_init_script(PROBE_JS.replace("__WANT__", json.dumps(want)))
        page = ctx.new_page()
        t0 = time.perf_counter()
        out: dict = {"url": url}
        try:
            page.goto(url, wait_until="commit", timeout=timeout_s * 1000)
            page.wait_for_function("() => window.__rdProbe && window.__rdProbe.done", timeout=timeout_s * 1000,
                                   polling=50)
        except Exception as e:  # noqa: BLE001 - Playwright's TimeoutError and navigation errors alike
            out["error"] = f"nothing drawn within {timeout_s:g} s ({type(e).__name__}: {str(e).splitlines()[0][:200]})"
            return out
        out["wall_s"] = time.perf_counter() - t0
        p = page.evaluate("""() => { const p = window.__rdProbe; return {error: p.error, t: p.t, t_found: p.t_found,
            ws_messages: p.ws_messages, ws_bytes: p.ws_bytes, first_ws: p.first_ws, first_fig_ws: p.first_fig_ws,
            charts_then: p.charts_then, drawn_then: p.drawn_then, first_chart: p.first_chart, html: p.html, dom: p.dom}; }""")
        if p.get("error"):
            out["error"] = "the page shows an exception: " + p["error"]
            return out
        out.update(seconds=p["t"] / 1000, found_s=p["t_found"] / 1000, ws_messages=p["ws_messages"],
                   ws_bytes=p["ws_bytes"], first_ws_s=None if p["first_ws"] is None else p["first_ws"] / 1000,
                   first_fig_ws_s=None if p["first_fig_ws"] is None else p["first_fig_ws"] / 1000,
                   html_s=None if p["html"] is None else p["html"] / 1000,
                   dom_s=None if p["dom"] is None else p["dom"] / 1000,
                   charts_then=p["charts_then"], drawn_then=p["drawn_then"], first_chart=p["first_chart"])
        if settle_s > 0:
            out.update(settle(page, settle_s, timeout_s))
        return out
    finally:
        ctx.close()


def settle(page, quiet_s: float, cap_s: float) -> dict:
    """Wait until no new chart is drawn for `quiet_s` (at most `cap_s`); the charts and websocket
    traffic of the whole page load then."""
    t_end = time.perf_counter() + cap_s
    last, since = -1, time.perf_counter()
    while time.perf_counter() < t_end:
        n = page.evaluate("() => window.__rdProbe.drawnCharts()")
        if n != last:
            last, since = n, time.perf_counter()
        elif time.perf_counter() - since >= quiet_s:
            break
        page.wait_for_timeout(200)
    s = page.evaluate("""(quiet) => { const p = window.__rdProbe; const n = p.drawnCharts();
        const ws = p.ws.filter((m) => m[0] <= performance.now() - quiet);
        return {drawn: n, charts: p.charts(), ws_messages: ws.length, ws_bytes: ws.reduce((a, m) => a + m[1], 0),
                last_ws: ws.length ? ws[ws.length - 1][0] : null}; }""", quiet_s * 1000)
    return {"settled": {"charts": s["charts"], "drawn": s["drawn"], "ws_messages": s["ws_messages"],
                        "ws_bytes": s["ws_bytes"],
                        "last_ws_s": None if s["last_ws"] is None else s["last_ws"] / 1000}}
