"""`python -m benchmarks pages`: time to the first chart of the app's pages in a real browser.

Writes the built-in demo into a work folder (and keeps its live run growing, as the app does on the
demo), starts `streamlit run app.py -- <folder>` and, as the floor, a second Streamlit server on a
bare script that draws one plotly chart of a Metrics panel's size (`--floor-points` × `--floor-traces`
lines, in half the page width). Chromium (through Playwright) then opens, in a fresh browser context
per visit (no cache, no cookies, no session: a colleague opening a link):

- `floor`: the bare page, until its chart is drawn;
- `overview`: `/`, until the runs table (the `stDataFrame` glide grid canvas) is drawn;
- `metrics`: `/metrics?run=<live run>`, until the first chart is drawn;
- `compare`: `/compare?run=<live run>&runs=…` with five runs (the live run and the four most recently
  updated others, any kind), until the first chart is drawn.

"Drawn" is a `.js-plotly-plot` whose SVG holds a scatter trace with a drawn line path (resp. a data
grid canvas with a size), seen by a MutationObserver the page gets before its own scripts, and timed
at the next animation frame from the navigation's start (`performance.now()`). The same probe counts
the websocket messages (and bytes) the page received before that moment, the plotly charts in the
page then, and, after the first chart, how many charts the page shows once it stops changing
(`--settle` seconds without a new drawn chart). A visit that shows a Streamlit exception, or draws
nothing within `--timeout`, fails.

Each page is visited `--repeat` times, interleaved with the floor; the best visit counts, the first
(cold server caches) is reported too. Targets (issue): Metrics and Overview ≤ 2× the floor,
Compare ≤ 3×. Exit status 0 when every page drew (misses are reported, not failures), 1 otherwise.

The servers, the floor script, the probe and one visit are in `page_harness` (shared with `sessions`);
here: which pages, the bench's loop, and its report.
"""
from __future__ import annotations

import shutil
import sys
import textwrap
from pathlib import Path
from urllib.parse import quote

from benchmarks.common import format_table, pass_miss, print_report, secs, work_root
from benchmarks.page_harness import CHROMIUM_ARGS, PROBE_JS, VIEWPORT, Server, app_dir, server_env, visit, write_floor  # noqa: F401 (API: the sessions bench takes them from here)

PAGES = ("overview", "metrics", "compare")
TARGETS = {"overview": 2.0, "metrics": 2.0, "compare": 3.0}  # × the floor
WHAT = {"floor": "chart", "overview": "table", "metrics": "chart", "compare": "chart"}
COMPARE_RUNS = 5


# URLs ----------------------------------------------------------------------------------------------
def page_urls(runs) -> tuple[dict[str, str], dict]:
    """The path of each page, and which runs they show: Metrics of the live run (the prime-rl run
    with status running), Compare of the live run and the four most recently updated others."""
    live = runs[(runs["kind"] == "prime-rl") & (runs["status"] == "running")]
    if live.empty:
        raise RuntimeError("the demo has no running prime-rl run: " + ", ".join(f"{r} ({s})" for r, s in
                                                                              zip(runs["run_id"], runs["status"])))
    live_id = str(live["run_id"].iloc[0])
    others = runs[runs["run_id"] != live_id].sort_values("updated", ascending=False, na_position="last",
                                                        kind="stable")
    chosen = [live_id, *[str(r) for r in others["run_id"]][: COMPARE_RUNS - 1]]
    urls = {"overview": "/",
            "metrics": f"/metrics?run={quote(live_id, safe='')}",
            "compare": f"/compare?run={quote(live_id, safe='')}"
                       + "".join(f"&runs={quote(r, safe='')}" for r in chosen)}  # repeated: a multiselect
    return urls, {"live_run": live_id, "compare_runs": chosen}


# The bench -----------------------------------------------------------------------------------------
def measure(root: str, *, pages: tuple[str, ...] = PAGES, repeat: int = 3, timeout_s: float = 60.0,
            settle_s: float = 2.0, floor_points: int = 1500, floor_traces: int = 4, live: bool = True,
            chromium: str | None = None, log=print) -> dict:
    """Serve the demo and the floor from `root`, visit every page `repeat` times (interleaved with
    the floor) and return every visit: `{"visits": {name: [visit, ...]}, "urls": …, …}`."""
    from playwright.sync_api import sync_playwright

    import rundash_core as rd
    from rundash_core import demo

    root_p = Path(root)
    folder = demo.ensure_demo(root_p / "demo")
    runs = rd.discover([folder])
    urls, chosen = page_urls(runs)
    env = server_env(root_p / "cache")
    app = Server("app", app_dir() / "app.py", app_dir(), root_p / "app-server.log", args=[str(folder)], env=env)
    floor = Server("floor", write_floor(root_p / "floor", floor_points, floor_traces), root_p / "floor",
                   root_p / "floor-server.log", env=env)
    writer = None
    out: dict = {"urls": urls, **chosen, "demo": str(folder), "repeat": repeat, "timeout_s": timeout_s,
                 "floor": {"points": floor_points, "traces": floor_traces}, "visits": {}}
    try:
        if live:
            writer = demo.start_live_writer(folder)  # as the app does on the demo: the live run keeps growing
        for s in (app, floor):
            s.start()
        for s in (app, floor):
            s.wait_healthy()
        exe = chromium or shutil.which("chromium") or shutil.which("chromium-browser") or "/usr/bin/chromium"
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
            try:
                for r in range(max(repeat, 1)):
                    for name in ("floor", *pages):
                        base = floor.url if name == "floor" else app.url
                        path = "/" if name == "floor" else urls[name]
                        log(f"visiting {name} ({r + 1}/{max(repeat, 1)}) …", flush=True)
                        v = visit(browser, base + path, WHAT[name], timeout_s=timeout_s, settle_s=settle_s)
                        if "error" in v:
                            log(f"  {name}: {v['error']}", flush=True)
                        out["visits"].setdefault(name, []).append(v)
            finally:
                browser.close()
    finally:
        for s in (app, floor):
            s.stop()
        if writer is not None:
            demo.stop_live_writer(folder)
    out["app_log_tail"] = app.tail(2000)
    return out


def summarize(r: dict) -> dict:
    """Per page: best and first visit, ratio to the floor's best, target, ok; `drew` when every page
    (and the floor) drew at least once."""
    def best(name):
        ok = [v for v in r["visits"].get(name, []) if "seconds" in v]
        return min(ok, key=lambda v: v["seconds"]) if ok else None

    floor = best("floor")
    pages = {}
    for name in (n for n in r["visits"] if n != "floor"):
        b = best(name)
        visits = r["visits"][name]
        ratio = b["seconds"] / floor["seconds"] if b and floor else None
        pages[name] = {"seconds": b and b["seconds"], "first_s": visits[0].get("seconds"),
                       "all_seconds": [v.get("seconds") for v in visits], "floor_s": floor and floor["seconds"],
                       "ratio": ratio, "target": TARGETS[name], "ok": ratio is not None and ratio <= TARGETS[name],
                       "errors": [v["error"] for v in visits if "error" in v], "best": b}
    return {"floor": floor, "floor_all_seconds": [v.get("seconds") for v in r["visits"].get("floor", [])],
            "pages": pages, "drew": floor is not None and all(p["seconds"] is not None for p in pages.values())}


def _s(x) -> str:
    return "—" if x is None else secs(x)


def _kb(x) -> str:
    return "—" if x is None else f"{x / 1024:,.0f}"


def build_report(r: dict) -> tuple[str, dict]:
    s = summarize(r)
    floor = s["floor"]
    rows = [["floor (bare page, one plotly chart)", "chart", _s(floor and floor["seconds"]),
             _s(s["floor_all_seconds"][0] if s["floor_all_seconds"] else None),
             " ".join(_s(x) for x in s["floor_all_seconds"]), "", "1.00×" if floor else "—", "", ""]]
    for name, p in s["pages"].items():
        rows.append([f"{name} {r['urls'][name]}"[:70], WHAT[name], _s(p["seconds"]), _s(p["first_s"]),
                     " ".join(_s(x) for x in p["all_seconds"]), _s(p["floor_s"]),
                     "—" if p["ratio"] is None else f"{p['ratio']:.2f}×", f"≤ {p['target']:g}×",
                     "FAIL (never drew)" if p["seconds"] is None else pass_miss(p["ok"])])
    table = format_table(["page", "waits for", "best (s)", "1st visit (s)", "all visits (s)", "floor (s)", "ratio",
                          "target", "verdict"], rows, right={2, 3, 5, 6})
    detail_rows = []
    for name in ("floor", *s["pages"]):
        b = floor if name == "floor" else s["pages"][name]["best"]
        if not b:
            continue
        fc = b.get("first_chart") or {}
        st_ = b.get("settled") or {}
        detail_rows.append([name, _s(b.get("html_s")), _s(b.get("first_ws_s")), _s(b.get("first_fig_ws_s")),
                            _s(b["seconds"]),
                            f"{b['ws_messages']} / {_kb(b['ws_bytes'])}", f"{b['drawn_then']} of {b['charts_then']}",
                            f"{fc['traces']} × {fc['max_points']:,}" if fc else "table",
                            f"{st_['drawn']} of {st_['charts']}" if st_ else "",
                            f"{st_['ws_messages']} / {_kb(st_['ws_bytes'])}" if st_ else "",
                            _s(st_.get("last_ws_s")) if st_ else ""])
    detail = format_table(["page (best visit)", "HTML (s)", "1st ws msg (s)", "1st figure msg (s)", "first drawn (s)",
                           "ws msgs / KB then", "charts drawn then", "first chart traces × pts",
                           "charts drawn, settled", "ws msgs / KB, settled", "last ws msg (s)"],
                          detail_rows, right={1, 2, 3, 4, 5, 6, 8, 9, 10})
    head = (f"demo: {r['demo']} (live run {r['live_run']}); compare runs: {', '.join(r['compare_runs'])}; "
            f"floor: {r['floor']['traces']} traces × {r['floor']['points']:,} points; best of {r['repeat']} "
            f"fresh browser contexts per page; times from navigation start to the first chart (table) drawn")
    errors = [f"{n}: {e}" for n, p in s["pages"].items() for e in p["errors"]]
    errors += [f"floor: {v['error']}" for v in r["visits"].get("floor", []) if "error" in v]
    parts = [head, table, detail]
    if errors:
        parts.append("failed visits:\n" + "\n".join(f"- {e}" for e in errors))
    checks = {n: {k: p[k] for k in ("seconds", "first_s", "floor_s", "ratio", "target", "ok")}
              for n, p in s["pages"].items()}
    checks["floor_s"] = floor and floor["seconds"]
    checks["floor_first_chart"] = floor and floor.get("first_chart")
    checks["drew"] = s["drew"]
    return "\n\n".join(parts), checks


def add_parser(sub) -> None:
    p = sub.add_parser("pages", help="time to the first chart of Overview, Metrics and Compare in Chromium vs a bare "
                                     "plotly page")
    p.add_argument("--pages", default=",".join(PAGES),
                   help=f"comma-separated pages to visit (default {','.join(PAGES)})")
    p.add_argument("--repeat", type=int, default=3, help="fresh-browser visits per page, interleaved with the "
                                                         "floor; the best counts (default 3)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds a page may take to draw (default 60)")
    p.add_argument("--settle", type=float, default=2.0,
                   help="after the first chart, wait until no new chart is drawn for this long to count the "
                        "page's charts and traffic (default 2; 0: skip)")
    p.add_argument("--floor-points", type=int, default=1500, help="points per trace of the floor chart (default 1500)")
    p.add_argument("--floor-traces", type=int, default=4, help="traces of the floor chart (default 4)")
    p.add_argument("--no-live", action="store_true", help="do not keep the demo's live run growing")
    p.add_argument("--chromium", help="the Chromium binary (default: chromium on PATH, else /usr/bin/chromium)")
    p.add_argument("--dir", help="write the demo, the floor script and the server logs to DIR and keep them "
                                 "(default: a temp dir, removed at the end)")
    p.add_argument("--json", help="also write all measurements to this JSON file")
    p.set_defaults(func=cmd_pages)


def cmd_pages(args) -> int:
    pages = tuple(x.strip() for x in args.pages.split(",") if x.strip())
    unknown = [x for x in pages if x not in PAGES]
    if unknown or not pages:
        print(f"unknown page(s) {unknown}; choose from {', '.join(PAGES)}", file=sys.stderr)
        return 2
    with work_root(args.dir, "rundash-bench-pages-") as root:
        r = measure(root, pages=pages, repeat=args.repeat, timeout_s=args.timeout, settle_s=args.settle,
                    floor_points=args.floor_points, floor_traces=args.floor_traces, live=not args.no_live,
                    chromium=args.chromium)
    text, checks = build_report(r)
    print_report(text, args.json, {"results": r, "checks": checks})
    if not checks["drew"]:
        print("\n" + textwrap.indent(r.get("app_log_tail", ""), "  app server | "), file=sys.stderr)
        return 1
    return 0
