"""`python -m benchmarks charts`: building the Metrics page's figures of a big run.

Generates a prime-rl run of 20k steps × 300 metrics per producer (`metrics_data`), then, in one
fresh process:

- `load` (the floor): `open_run(dir).metrics()` with an empty cache: what any view needs first;
- `section`: the figures of one section (the first, the train section, and the largest one), as the
  page builds them: the series index of the frame, smoothing on the full series (debiased EMA),
  min/max downsampling, the plotly figure and its JSON (what is sent to the browser);
- `all-50`: the all-metrics view filtered to 50 keys (one figure per key), the same way;
- points: the most points any trace of those figures holds.

Targets (issue 4): one section ≤ 1× the frame load; ≤ 1,600 points per series.
"""
from __future__ import annotations

import gc
import os
import time

import plotly.io as pio

import rundash_core as rd
from benchmarks import metrics_data as md
from benchmarks.common import add_common_options, format_table, pass_miss, print_report, run_one, secs, work_root
from rundash_core import cache
from rundash_core.charts.figures import ChartOptions
from rundash_core.charts.keytree import key_tree
from rundash_core.charts.sections import sections_for
from rundash_core.charts.series import series_index
from rundash_core.charts.view import key_groups, metric_charts, section_charts

SECTION_VS_LOAD = 1.0
MAX_POINTS_PER_SERIES = 1600
FILTER_KEYS = 50
OPTIONS = ChartOptions(smoothing="ema", amount=0.6)


def _sent(charts) -> tuple[int, int, int]:
    """(figures, traces, most points in one trace), serialising each figure as the page does."""
    traces = points = 0
    for c in charts:
        if c.series:
            pio.to_json(c.figure, validate=False)
        traces += len(c.figure.data)
        points = max([points, *(len(t.x) for t in c.figure.data if t.x is not None)])
    return len(charts), traces, points


def measure(contender: str, run_dir: str) -> dict:
    if contender != "charts":
        raise ValueError(f"unknown contender {contender!r}")
    cache.shared.clear()
    gc.collect()
    t = time.perf_counter()
    run = rd.open_run(run_dir)
    tidy = run.metrics()
    load = time.perf_counter() - t
    ov = run.overview()

    t = time.perf_counter()
    index = series_index(run)
    index_s = time.perf_counter() - t
    sections = sections_for(run.kind, ov.flavor, index.metrics, train_envs=ov.train_envs, eval_envs=ov.eval_envs)
    out = {"load": load, "index": index_s, "rows": len(tidy), "metrics": len(index.metrics), "sections": {}}
    for s in sections:
        t = time.perf_counter()
        charts = section_charts(index, s, "step", OPTIONS)
        n_fig, n_traces, points = _sent(charts)
        out["sections"][s.title] = {"seconds": time.perf_counter() - t, "figures": n_fig, "traces": n_traces,
                                    "points": points, "series": sum(len(c.series) for c in charts)}
    keys = _filtered_keys(index.metrics)
    t = time.perf_counter()
    charts = metric_charts(index, keys, "step", OPTIONS)
    n_fig, n_traces, points = _sent(charts)
    out["all50"] = {"seconds": time.perf_counter() - t, "figures": n_fig, "traces": n_traces, "points": points,
                    "keys": len(keys), "series": sum(len(c.series) for c in charts),
                    "longest_series": max((len(s) for c in charts for s in c.series), default=0)}
    return out


def _filtered_keys(metrics: list[str]) -> list[str]:
    """50 keys, as a user filtering the all-metrics view would get them (`/mean$`, in tree order)."""
    tree = key_tree(metrics, pattern=r"/mean$", max_depth=3)
    return [k for _, keys in key_groups(tree) for k in keys][:FILTER_KEYS]


def build_report(gen: md.Generated, spec: md.Spec, r: dict) -> tuple[str, dict]:
    load = r["load"]
    rows = [["floor: open_run().metrics() (cold load of the frame)", secs(load), "100%", "", "", ""],
            ["  series index of the frame (once per frame version)", secs(r["index"]), f"{100 * r['index'] / load:.0f}%",
             "", "", ""]]
    for title, s in r["sections"].items():
        rows.append([f"section {title!r} (index excluded)", secs(s["seconds"]), f"{100 * s['seconds'] / load:.0f}%",
                     str(s["figures"]), str(s["series"]), f"{s['points']:,}"])
    a = r["all50"]
    rows.append([f"all metrics filtered to {a['keys']} keys", secs(a["seconds"]), f"{100 * a['seconds'] / load:.0f}%",
                 str(a["figures"]), str(a["series"]), f"{a['points']:,}"])
    table = format_table(["measurement", "time (s)", "of load", "figures", "series", "max points/trace"], rows,
                         right={1, 2, 3, 4, 5})
    worst = max((s["seconds"] for s in r["sections"].values()), default=0.0) + r["index"]
    first = next(iter(r["sections"].values()), {"seconds": 0.0})["seconds"] + r["index"]
    points = max([a["points"], *(s["points"] for s in r["sections"].values())])
    checks = {"first_section_ratio": first / load, "worst_section_ratio": worst / load, "max_points": points,
              "section_ok": worst <= SECTION_VS_LOAD * load, "points_ok": points <= MAX_POINTS_PER_SERIES}
    head = (f"run: {spec.steps:,} steps × {spec.keys} keys/producer, {gen.bytes / 1e6:,.1f} MB, {r['rows']:,} tidy rows, "
            f"{r['metrics']} metrics, longest series {a['longest_series']:,} points; smoothing: debiased EMA 0.6")
    verdict = (f"first section incl. index {first:.3f} s = {checks['first_section_ratio']:.2f}× load, slowest section "
               f"incl. index {worst:.3f} s = {checks['worst_section_ratio']:.2f}× load (≤ {SECTION_VS_LOAD:g}×): "
               f"{pass_miss(checks['section_ok'])} · max points per trace {points:,} (≤ {MAX_POINTS_PER_SERIES:,}): "
               f"{pass_miss(checks['points_ok'])}")
    return "\n\n".join([head, table, verdict]), checks


def add_parser(sub) -> None:
    c = sub.add_parser("charts", help="Metrics page figures of a 20k-step × 300-metric run vs loading its frame")
    c.add_argument("--steps", type=int, default=20000, help="training steps (default 20000)")
    c.add_argument("--keys", type=int, default=300, help="distinct keys per producer (default 300)")
    add_common_options(c, "the run to DIR/bench-run")
    c.set_defaults(func=cmd_charts)


def cmd_charts(args) -> int:
    spec = md.Spec(steps=args.steps, keys=args.keys)
    with work_root(args.dir, "rundash-bench-charts-") as root:
        run_dir = os.path.join(root, "bench-run")
        print(f"generating {spec.steps:,} steps × {spec.keys} keys/producer into {run_dir} …", flush=True)
        gen = md.generate_run(run_dir, spec)
        print(f"generated {gen.bytes / 1e6:,.1f} MB in {gen.seconds:.1f} s; measuring in a fresh process …", flush=True)
        r = run_one("charts", "charts", {"run_dir": run_dir}, in_process=args.in_process)
        text, checks = build_report(gen, spec, r)
        print_report(text, args.json, {"results": r, "checks": checks})
        return 0
