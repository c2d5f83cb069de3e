"""`python -m benchmarks sessions`: many users on one server, in a real browser.

Writes the built-in demo into a work folder (its live run keeps growing, as the app does on the
demo) and serves it with `streamlit run app.py -- <folder>`. Chromium (Playwright) then opens
sessions, each in its own browser context (no shared cookies or cache: N colleagues), on the
Metrics page of the live run, whose charts refresh every `PERIOD_S` seconds. The N sessions run in
a second Chromium at the lowest CPU priority (`niced`): they stand in for N colleagues' own
machines but share the server's cores; the browsers' CPU per period is reported beside the
server's, to tell what the server spends from what drawing costs.

1. one session alone: time to its first chart, then, over `--window` seconds, whether its charts
   advance (a trace's last x changes) within two refresh periods, and the server's CPU time
   (`/proc/<pid>/stat`, user + system) per refresh period; and a fresh session's Overview (time to
   the runs table) as the baseline of step 3;
2. `--sessions` N sessions opened at once: each one's time to its first chart, the time until all
   drew, how many advance within two refresh periods, the server's CPU time per refresh period
   and its memory (RSS now and peak);
3. with the N sessions open, one more types a catastrophic regex (`(.*)*X`) in the Overview's name
   filter; right after, the server's health check and another fresh session's Overview are timed.

Targets (issue "Launch and the shared head-node instance"): every session draws and advances;
CPU per period with N sessions ≤ 4× that with one; RSS ≤ the cache cap (`RUNDASH_CACHE_BYTES`)
plus the one-session RSS; under the hostile regex the health check answers within 1 s and the
other Overview within 3× its baseline. Exit status 0 when the sessions drew (misses are reported),
1 otherwise.
"""
from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import time
import urllib.request
from pathlib import Path

from benchmarks.common import format_table, pass_miss, print_report, work_root
from benchmarks.pages import CHROMIUM_ARGS, PROBE_JS, VIEWPORT, Server, app_dir, page_urls, server_env
from rundash_core.cache import _limit_from_env

PERIOD_S = 5.0  # the Metrics page's live refresh
CPU_TARGET = 4.0
HOSTILE = "(.*)*X"
CHART_STATE_JS = """() => JSON.stringify(Array.from(document.querySelectorAll('.js-plotly-plot')).map(
    (el) => (el._fullData || []).map((t) => (t.x && t.x.length) ? [t.x.length, t.x[t.x.length - 1]] : null)))"""
PROBE_STATE_JS = """() => { const p = window.__rdProbe; return p ? {done: p.done, t: p.t, error: p.error} : null; }"""


def server_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def browser_cpu_s(root: int | None = None) -> float:
    """User + system CPU seconds so far of the Chromium processes this process started (its
    descendants: the bench's browsers run on the server's cores, what they spend is not the
    server's; other browsers on the machine, which may exit meanwhile, are not counted)."""
    parents, names = {}, {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
            parents[int(proc.name)] = int(stat[stat.rindex(")") + 2:].split()[1])
            names[int(proc.name)] = (proc / "comm").read_text()
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
    ours, todo = set(), [os.getpid() if root is None else root]
    while todo:
        pid = todo.pop()
        kids = [c for c, parent in parents.items() if parent == pid and c not in ours]
        ours.update(kids)
        todo += kids
    total = 0.0
    for pid in ours:
        if names[pid].startswith(("chrom", "headless")):
            try:
                total += server_cpu_s(pid)
            except (OSError, ValueError, IndexError):
                continue
    return total


def server_rss_mb(pid: int) -> tuple[float, float]:
    """(RSS now, peak RSS) of a process, in MB."""
    status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    kb = lambda k: int(status.get(k, "0 kB").split()[0])  # noqa: E731
    return kb("VmRSS") / 1024, kb("VmHWM") / 1024


class Session:
    """One user: a fresh browser context on `url`, with the first-chart probe installed."""

    def __init__(self, browser, url: str, want: str = "chart"):
        self.ctx = browser.new_context(viewport=VIEWPORT)
        self.ctx.add_init_script(PROBE_JS.replace("__WANT__", json.dumps(want)))
        self.page = self.ctx.new_page()
        self.url, self.first_s, self.error = url, None, None

    def open(self, timeout_s: float) -> None:
        self.page.goto(self.url, wait_until="commit", timeout=timeout_s * 1000)

    def poll(self) -> bool:
        """True once the page drew (or failed); records the time from its navigation start."""
        if self.first_s is not None or self.error:
            return True
        p = self.page.evaluate(PROBE_STATE_JS)
        if p and p.get("done"):
            if p.get("error"):
                self.error = "the page shows an exception: " + p["error"][:300]
            else:
                self.first_s = p["t"] / 1000
            return True
        return False

    def chart_state(self) -> str:
        return self.page.evaluate(CHART_STATE_JS)

    def close(self) -> None:
        self.ctx.close()


def open_all(sessions: list[Session], timeout_s: float, log=print) -> float:
    """Navigate every session, then wait until each drew (or time ran out); the wall seconds."""
    t0 = time.perf_counter()
    for s in sessions:
        s.open(timeout_s)
    deadline = t0 + timeout_s
    while time.perf_counter() < deadline and not all([s.poll() for s in sessions]):
        sessions[0].page.wait_for_timeout(100)
    for s in sessions:
        if s.first_s is None and not s.error:
            s.error = f"no chart within {timeout_s:g} s"
    done = sum(s.first_s is not None for s in sessions)
    log(f"  {done} of {len(sessions)} sessions drew, in {time.perf_counter() - t0:.1f} s", flush=True)
    return time.perf_counter() - t0


def observe(sessions: list[Session], pid: int, window_s: float) -> dict:
    """Over `window_s` (≥ two refresh periods): which sessions' charts changed within two periods,
    and the server's CPU seconds per refresh period."""
    drawn = [s for s in sessions if s.first_s is not None]
    before = {id(s): s.chart_state() for s in drawn}
    cpu0, browser0, t0 = server_cpu_s(pid), browser_cpu_s(), time.perf_counter()
    advanced: dict[int, float] = {}
    while time.perf_counter() - t0 < max(window_s, 2 * PERIOD_S + 1):
        for s in drawn:
            if id(s) not in advanced and s.chart_state() != before[id(s)]:
                advanced[id(s)] = time.perf_counter() - t0
        (drawn or sessions)[0].page.wait_for_timeout(250)
    elapsed, cpu, browser = time.perf_counter() - t0, server_cpu_s(pid) - cpu0, browser_cpu_s() - browser0
    within = [s for s in drawn if advanced.get(id(s), 1e9) <= 2 * PERIOD_S + 1]
    rss, peak = server_rss_mb(pid)
    return {"sessions": len(sessions), "drew": len(drawn), "advanced": len(within),
            "advance_s": [advanced.get(id(s)) for s in sessions], "first_s": [s.first_s for s in sessions],
            "errors": [s.error for s in sessions if s.error], "cpu_s": cpu, "window_s": elapsed,
            "cpu_per_period_s": cpu / (elapsed / PERIOD_S), "browser_cpu_per_period_s": browser / (elapsed / PERIOD_S),
            "rss_mb": rss, "peak_rss_mb": peak}


def overview_time(browser, url: str, timeout_s: float) -> float | None:
    """A fresh session's seconds to the Overview's runs table (None: not within the timeout)."""
    s = Session(browser, url, want="table")
    try:
        open_all([s], timeout_s, log=lambda *a, **k: None)
        return s.first_s
    finally:
        s.close()


def hostile_regex(browser, base: str, timeout_s: float) -> dict:
    """One session types a catastrophic regex in the Overview's name filter; the health check and
    another session's Overview are timed right after."""
    attacker = Session(browser, base + "/", want="table")
    try:
        open_all([attacker], timeout_s, log=lambda *a, **k: None)
        if attacker.first_s is None:
            return {"health_s": None, "overview_s": None, "error": f"the attacker's Overview: {attacker.error}"}
        try:
            box = attacker.page.get_by_label("Name (regex)")
            box.fill(HOSTILE, timeout=timeout_s * 1000)
            box.press("Enter", timeout=timeout_s * 1000)
        except Exception as e:  # noqa: BLE001 - Playwright's TimeoutError: reported, the report still prints
            return {"health_s": None, "overview_s": None, "error": f"could not type the regex: {type(e).__name__}"}
        attacker.page.wait_for_timeout(200)
        t0 = time.perf_counter()
        try:
            ok = urllib.request.urlopen(base + "/_stcore/health", timeout=timeout_s).read() == b"ok"
            health = time.perf_counter() - t0 if ok else None
        except OSError:
            health = None
        other = overview_time(browser, base + "/", timeout_s)
        return {"health_s": health, "overview_s": other}
    finally:
        attacker.close()


def niced(exe: str, folder: Path) -> str:
    """A launcher of `exe` at the lowest CPU priority. The N sessions' browser stands in for N
    colleagues' own machines, yet runs on the server's cores: niced, it takes only the CPU the
    server and the measuring browser leave, instead of starving them."""
    path = folder / "chromium-niced"
    path.write_text(f'#!/bin/sh\nexec nice -n 19 "{exe}" "$@"\n')
    path.chmod(0o755)
    return str(path)


def measure(root: str, *, sessions: int = 20, window_s: float = 15.0, timeout_s: float = 180.0,
            hostile: bool = True, chromium: str | None = None, log=print) -> dict:
    """Serve the demo from `root` and run the three steps (see the module's docstring)."""
    from playwright.sync_api import sync_playwright

    import rundash_core as rd
    from rundash_core import demo

    root_p = Path(root)
    folder = demo.ensure_demo(root_p / "demo")
    demo.start_live_writer(folder)  # first: a kept `--dir`'s live run has gone quiet since
    time.sleep(3)
    urls, chosen = page_urls(rd.discover([folder]))
    app = Server("app", app_dir() / "app.py", app_dir(), root_p / "app-server.log", args=[str(folder)],
                 env=server_env(root_p / "cache"))
    out: dict = {"sessions": sessions, "url": urls["metrics"], "live_run": chosen["live_run"], "period_s": PERIOD_S,
                 "cache_cap_mb": _limit_from_env() / 2**20}
    try:
        app.start()
        app.wait_healthy()
        exe = chromium or shutil.which("chromium") or shutil.which("chromium-browser") or "/usr/bin/chromium"
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
            crowd_browser = pw.chromium.launch(executable_path=niced(exe, root_p), args=CHROMIUM_ARGS)
            try:
                log("one session …", flush=True)
                one = [Session(browser, app.url + urls["metrics"])]
                open_all(one, timeout_s, log)
                out["one"] = observe(one, app.proc.pid, window_s)
                [s.close() for s in one]
                out["overview_base_s"] = overview_time(browser, app.url + "/", timeout_s)
                log(f"{sessions} sessions …", flush=True)
                many = [Session(crowd_browser, app.url + urls["metrics"]) for _ in range(sessions)]
                out["open_all_s"] = open_all(many, timeout_s, log)
                out["many"] = observe(many, app.proc.pid, window_s)
                if hostile:
                    log("a hostile regex …", flush=True)
                    out["hostile"] = hostile_regex(browser, app.url, timeout_s)
                [s.close() for s in many]
            finally:
                crowd_browser.close()
                browser.close()
    finally:
        app.stop()
        demo.stop_live_writer(folder)
    out["app_log_tail"] = app.tail(2000)
    return out


def checks(r: dict) -> dict:
    one, many = r["one"], r["many"]
    ratio = many["cpu_per_period_s"] / one["cpu_per_period_s"] if one["cpu_per_period_s"] > 0 else None
    c = {"all_drew": many["drew"] == many["sessions"], "all_advanced": many["advanced"] == many["sessions"],
         "cpu_ratio": ratio, "cpu_ok": ratio is not None and ratio <= CPU_TARGET,
         "rss_limit_mb": r["cache_cap_mb"] + one["peak_rss_mb"], "drew": many["drew"] > 0 and one["drew"] == 1}
    c["rss_ok"] = many["peak_rss_mb"] <= c["rss_limit_mb"]
    h = r.get("hostile")
    if h:
        c["health_ok"] = h["health_s"] is not None and h["health_s"] <= 1.0
        base = r.get("overview_base_s")
        c["overview_ok"] = h["overview_s"] is not None and base is not None and h["overview_s"] <= 3 * base
    return c


def _s(x) -> str:
    return "—" if x is None else f"{x:.2f}"


def _spread(xs: list) -> str:
    got = [x for x in xs if x is not None]
    return f"{statistics.median(got):.2f} / {max(got):.2f}" if got else "—"


def build_report(r: dict) -> tuple[str, dict]:
    c = checks(r)
    one, many, n = r["one"], r["many"], r["sessions"]
    rows = [
        ["sessions that drew a chart", f"{one['drew']}/1", f"{many['drew']}/{n}", "all", pass_miss(c["all_drew"])],
        ["time to first chart, median / max (s)", _spread(one["first_s"]), _spread(many["first_s"]), "", ""],
        [f"opening all {n} sessions (s)", "", _s(r["open_all_s"]), "", ""],
        [f"charts advanced within 2 refresh periods ({2 * r['period_s']:g} s)", f"{one['advanced']}/1",
         f"{many['advanced']}/{n}", "all", pass_miss(c["all_advanced"])],
        [f"server CPU per refresh period ({r['period_s']:g} s)", f"{one['cpu_per_period_s']:.2f} s",
         f"{many['cpu_per_period_s']:.2f} s", f"≤ {CPU_TARGET:g}× one",
         ("—" if c["cpu_ratio"] is None else f"{c['cpu_ratio']:.2f}× ") + pass_miss(c["cpu_ok"])],
        [f"browsers' CPU per refresh period (same {os.cpu_count()} CPUs)", f"{one['browser_cpu_per_period_s']:.2f} s",
         f"{many['browser_cpu_per_period_s']:.2f} s", "", ""],
        ["server RSS now / peak (MB)", f"{one['rss_mb']:,.0f} / {one['peak_rss_mb']:,.0f}",
         f"{many['rss_mb']:,.0f} / {many['peak_rss_mb']:,.0f}",
         f"≤ cache cap + one ({c['rss_limit_mb']:,.0f})", pass_miss(c["rss_ok"])],
    ]
    if h := r.get("hostile"):
        rows.append([f"health check after `{HOSTILE}` in another session (s)", "", _s(h["health_s"]), "≤ 1",
                     pass_miss(c["health_ok"])])
        rows.append(["another session's Overview then (s)", _s(r.get("overview_base_s")), _s(h["overview_s"]),
                     "≤ 3× alone", pass_miss(c["overview_ok"])])
    table = format_table(["measure", "1 session", f"{n} sessions", "target", "verdict"], rows)
    per = format_table(["session", "first chart (s)", "advanced after (s)"],
                       [[str(i + 1), _s(f), _s(a)] for i, (f, a) in enumerate(zip(many["first_s"], many["advance_s"]))],
                       right={1, 2})
    head = (f"{n} Chromium contexts (one niced browser) on {r['url']} (the demo's live run {r['live_run']}); "
            f"observed over {many['window_s']:.0f} s; {os.cpu_count()} CPUs")
    parts = [head, table, per]
    if h and h.get("error"):
        parts.append(f"hostile step not measured: {h['error']}")
    if many["errors"]:
        parts.append("failed sessions:\n" + "\n".join(f"- {e}" for e in many["errors"]))
    return "\n\n".join(parts), c


def add_parser(sub) -> None:
    p = sub.add_parser("sessions", help="N browser sessions on the demo's live run: first charts, refreshes, "
                                        "server CPU and memory, a hostile regex")
    p.add_argument("--sessions", type=int, default=20, help="browser sessions opened at once (default 20)")
    p.add_argument("--window", type=float, default=15.0, help="seconds the sessions are observed (default 15)")
    p.add_argument("--timeout", type=float, default=180.0, help="seconds the sessions may take to draw (default 180)")
    p.add_argument("--no-hostile", action="store_true", help="skip the catastrophic-regex step")
    p.add_argument("--chromium", help="the Chromium binary (default: chromium on PATH, else /usr/bin/chromium)")
    p.add_argument("--dir", help="write the demo and the server log to DIR and keep them (default: a temp dir)")
    p.add_argument("--json", help="also write all measurements to this JSON file")
    p.set_defaults(func=cmd_sessions)


def cmd_sessions(args) -> int:
    if args.sessions < 1:
        print("--sessions must be at least 1", file=sys.stderr)
        return 2
    with work_root(args.dir, "rundash-bench-sessions-") as root:
        r = measure(root, sessions=args.sessions, window_s=args.window, timeout_s=args.timeout,
                    hostile=not args.no_hostile, chromium=args.chromium)
    text, c = build_report(r)
    print_report(text, args.json, {"results": r, "checks": c})
    return 0 if c["drew"] else 1
