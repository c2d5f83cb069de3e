"""`python -m benchmarks metrics`: loading a ~200 MB prime-rl metrics.jsonl.

Generates a synthetic run (`metrics_data`), then measures, each contender in a fresh process:

- `rundash`: cold load, `open_run(dir).metrics()` → the merged tidy frame;
- `pandas`: `pandas.read_json(lines=True)`, what a notebook would do (wide, unmerged);
- `pyarrow`: `pyarrow.json.read_json`, a multi-threaded C++ parse: the reference for raw parsing;
- `verify`: the tidy frame against `metrics_data.independent_merge`, value for value with times;
- `phases`: read, parse, ingest and tidy view timed one after the other (cProfile with --profile);
- `refresh`: after a cold load, append 10 new rows per round and time `store.refresh()` alone and
  `run.metrics()` (refresh + tidy view).
"""
from __future__ import annotations

import gc
import os
import time
from dataclasses import asdict

import numpy as np
import orjson
import pandas as pd
import pyarrow.json as pj

import rundash_core as rd
from benchmarks import metrics_data as md
from benchmarks.common import add_common_options, best_of, format_table, mb, pass_miss, print_report, run_one, secs, work_root
from rundash_core import cache
from rundash_core.io.files import read_range
from rundash_core.io.jsonl import LineProblems, parse_jsonl_bytes
from rundash_core.metrics.store import MetricStore

ROWS_PER_ROUND = 10


# Contenders (one per process) ---------------------------------------------------------------------

def measure(contender: str, path: str, spec: dict | None = None, refresh_repeat: int = 5,
            profile: bool = False) -> dict:
    if contender == "rundash":
        seconds, _run, frame = cold_load(path)
        return {"seconds": seconds, "rows": len(frame)}
    if contender == "pandas":
        t = time.perf_counter()
        df = pd.read_json(path, lines=True)
        return {"seconds": time.perf_counter() - t, "rows": len(df), "shape": f"{df.shape[0]:,}×{df.shape[1]}"}
    if contender == "pyarrow":
        t = time.perf_counter()
        table = pj.read_json(path)
        return {"seconds": time.perf_counter() - t, "rows": table.num_rows,
                "shape": f"{table.num_rows:,}×{table.num_columns}"}
    if contender == "verify":
        seconds, _run, frame = cold_load(path)
        with open(path, "rb") as f:
            merged = md.independent_merge(f, orjson.loads)
        return {"seconds": seconds, **compare_tidy(frame, merged)}
    if contender == "phases":
        return measure_phases(path, profile)
    if contender == "refresh":
        return measure_refresh(path, md.Spec(**(spec or {})), refresh_repeat)
    raise ValueError(f"unknown contender {contender!r}")


def run_dir_of(path: str) -> str:
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(path))))


def cold_load(path: str):
    """(seconds, run, tidy frame) of `open_run(run dir).metrics()` with an empty cache."""
    cache.shared.clear()
    gc.collect()
    t = time.perf_counter()
    run = rd.open_run(run_dir_of(path))
    frame = run.metrics()
    return time.perf_counter() - t, run, frame


def measure_phases(path: str, profile: bool) -> dict:
    """The pieces of a cold load one after the other, then a whole cold load in this process for
    comparison (the difference is run detection and the tail's bookkeeping)."""
    gc.collect()
    store = MetricStore(path)  # as prime-rl RL runs use it
    marks = [time.perf_counter()]
    data = read_range(path, 0)
    marks.append(time.perf_counter())
    parsed = parse_jsonl_bytes(data, LineProblems())
    marks.append(time.perf_counter())
    store._ingest(parsed)
    marks.append(time.perf_counter())
    frame = store.tidy()
    marks.append(time.perf_counter())
    names = ["read bytes (io.files.read_range)", "parse (io.jsonl.parse_jsonl_bytes, orjson)",
             "ingest (MetricStore._ingest: merge into blocks)", "tidy view (store.tidy())"]
    out = {"phases": dict(zip(names, np.diff(marks).tolist())), "seconds": marks[-1] - marks[0], "rows": len(frame)}
    del store, data, parsed, frame
    out["cold_same_process"] = cold_load(path)[0]
    if profile:
        out["cprofile"] = cprofile_cold_load(path)
    return out


def cprofile_cold_load(path: str, top: int = 20) -> str:
    import cProfile
    import io
    import pstats

    cache.shared.clear()
    gc.collect()
    prof = cProfile.Profile()
    prof.runcall(lambda: rd.open_run(run_dir_of(path)).metrics())
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(top)
    return s.getvalue()


def measure_refresh(path: str, spec: md.Spec, repeat: int) -> dict:
    """Cold load, then rounds of: append 10 new rows and time `run.metrics()`; append 10 more and
    time `store.refresh()` alone. The tidy frame must grow by exactly the appended values."""
    cold, run, frame = cold_load(path)
    store = run.store()
    rows0, step0 = len(frame), store.max_step()
    appender = md.Appender(path, spec)
    best = {"metrics": float("inf"), "refresh": float("inf")}
    appended = grew = 0
    for _ in range(max(repeat, 1)):
        for what in ("metrics", "refresh"):
            before = len(frame)
            appended += sum(map(md.count_values, appender.append(ROWS_PER_ROUND)))
            t = time.perf_counter()
            if what == "metrics":
                frame = run.metrics()
            else:
                store.refresh()
            best[what] = min(best[what], time.perf_counter() - t)
            frame = store.tidy()
            grew += len(frame) - before
    return {"seconds": cold, "rows": rows0, "rounds": max(repeat, 1), "metrics_s": best["metrics"],
            "store_refresh_s": best["refresh"], "appended_values": appended, "rows_added": grew,
            "steps": [step0, store.max_step()], "same_store": run.store() is store}


def compare_tidy(tidy: pd.DataFrame, merged: md.Merged) -> dict:
    """Every tidy row against the independent merge, keyed by (producer, step, metric) and, for
    time-keyed rows (step -1 here), their time; compares value and time of each."""
    codes: dict[str, int] = {}

    def code(name: str) -> int:
        return codes.setdefault(name, len(codes))

    prod, step, metric, value, when = [], [], [], [], []
    for (p, s), (values, times) in merged.stepped.items():
        prod += [code(p)] * len(values)
        step += [s] * len(values)
        metric += map(code, values)
        value += values.values()
        when += times.values()
    if merged.timed:
        producers, times, keys, values = zip(*merged.timed)
        prod += map(code, producers)
        step += [-1] * len(times)
        metric += map(code, keys)
        value += values
        when += times
    want = pd.DataFrame({"p": prod, "s": step, "m": metric, "value": np.array(value, dtype=float), "time": when})

    def recode(col: pd.Series) -> np.ndarray:
        return np.array([code(str(c)) for c in col.cat.categories], dtype=np.int64)[col.cat.codes.to_numpy()]

    got = pd.DataFrame({"p": recode(tidy["producer"]), "s": tidy["step"].fillna(-1).to_numpy(dtype=np.int64),
                        "m": recode(tidy["metric"]), "value": tidy["value"].to_numpy(), "time": tidy["time"].to_numpy()})
    for f in (want, got):  # time-keyed rows are told apart by their time
        f["t"] = np.where(f["s"] == -1, f["time"], 0.0)
    both = got.merge(want, on=["p", "s", "m", "t"], how="outer", suffixes=("_got", "_want"), indicator=True)
    out = {"tidy_rows": len(tidy), "independent_rows": merged.tidy_rows,
           "duplicates": int(got.duplicated(["p", "s", "m", "t"]).sum())}
    for kind, sel in (("stepped", both["s"] >= 0), ("timed", both["s"] < 0)):
        part = both[sel]
        matched = part[part["_merge"] == "both"]
        out[kind] = {"checked": len(matched), "value_off": int((matched["value_got"] != matched["value_want"]).sum()),
                     "time_off": int((matched["time_got"] != matched["time_want"]).sum()),
                     "missing": int((part["_merge"] == "right_only").sum()),
                     "extra": int((part["_merge"] == "left_only").sum())}
    out["ok"] = (out["tidy_rows"] == out["independent_rows"] and out["duplicates"] == 0
                 and all(v == 0 for k in ("stepped", "timed") for n, v in out[k].items() if n != "checked"))
    return out


# Report ---------------------------------------------------------------------------------------------

def _diff_text(d: dict) -> str:
    return f"{d['checked']:,} checked: {d['value_off']} values off, {d['time_off']} times off, " \
           f"{d['missing']} missing, {d['extra']} extra"


def build_report(gen: md.Generated, spec: md.Spec, results: dict, in_process: bool) -> tuple[str, dict]:
    rd_, pd_, pa_, ver, ref = (results[k] for k in ("rundash", "pandas", "pyarrow", "verify", "refresh"))
    cold = rd_["seconds"]

    def rss(r: dict) -> list[str]:
        return ["n/a", "n/a"] if in_process else [mb(r["peak_rss_mb"]), mb(r["delta_rss_mb"])]

    def pct(x: float) -> str:
        return f"{100 * x / cold:.2f}%" if x < 0.1 * cold else f"{100 * x / cold:,.0f}%"

    rows = [
        ["rundash cold load: open_run().metrics() → tidy", secs(cold), "100%", *rss(rd_), f"{rd_['rows']:,} tidy rows"],
        ["pandas.read_json(lines=True)", secs(pd_["seconds"]), pct(pd_["seconds"]), *rss(pd_), f"{pd_['shape']} wide, unmerged"],
        ["pyarrow.json.read_json (raw parse)", secs(pa_["seconds"]), pct(pa_["seconds"]), *rss(pa_),
         f"{pa_['shape']} table, unmerged"],
        [f"rundash refresh +{ROWS_PER_ROUND} rows: run.metrics()", secs(ref["metrics_s"]), pct(ref["metrics_s"]), "", "",
         f"best of {ref['rounds']}; refresh + tidy view"],
        ["  store.refresh() alone", secs(ref["store_refresh_s"]), pct(ref["store_refresh_s"]), "", "",
         "poll + parse + ingest"],
    ]
    table = format_table(["measurement", "time (s)", "of cold", "peak RSS (MB)", "Δ RSS (MB)", "result"], rows,
                         right={1, 2, 3, 4})
    checks = {
        "pandas_over_rundash": pd_["seconds"] / cold,
        "rundash_over_pyarrow": cold / pa_["seconds"],
        "refresh_over_cold": ref["metrics_s"] / cold,
        "tidy_ok": bool(ver["ok"]),
        "refresh_rows_ok": ref["rows_added"] == ref["appended_values"] and ref["same_store"]
                           and ref["steps"][1] > ref["steps"][0],
    }
    check_rows = [
        ["pandas / rundash", f"{checks['pandas_over_rundash']:.1f}×", "≥ 4×", pass_miss(checks["pandas_over_rundash"] >= 4)],
        ["rundash / pyarrow", f"{checks['rundash_over_pyarrow']:.2f}×", "≤ 1.5×",
         pass_miss(checks["rundash_over_pyarrow"] <= 1.5)],
        ["refresh / cold (run.metrics())", f"{100 * checks['refresh_over_cold']:.2f}%", "< 5%",
         pass_miss(checks["refresh_over_cold"] < 0.05)],
        ["tidy rows = independent merge", f"{ver['tidy_rows']:,} = {ver['independent_rows']:,}", "equal",
         pass_miss(ver["tidy_rows"] == ver["independent_rows"] and ver["duplicates"] == 0)],
        ["step-keyed values and times", _diff_text(ver["stepped"]), "0 off",
         pass_miss(all(v == 0 for k, v in ver["stepped"].items() if k != "checked"))],
        ["time-keyed values and times", _diff_text(ver["timed"]), "0 off",
         pass_miss(all(v == 0 for k, v in ver["timed"].items() if k != "checked"))],
        ["refresh adds the appended values", f"{ref['rows_added']:,} = {ref['appended_values']:,} "
         f"(steps {ref['steps'][0]:,} → {ref['steps'][1]:,})", "equal", pass_miss(checks["refresh_rows_ok"])],
    ]
    reps = len(rd_.get("all_seconds", [1]))
    head = (f"file: {gen.path}\n"
            f"      {gen.bytes / 1e6:,.1f} MB, {gen.lines:,} lines, {gen.positions:,} step positions, "
            f"{gen.values:,} metric values (before merge); generated in {gen.seconds:.1f} s\n"
            f"      {spec.keys} distinct keys per producer; per-env keys only for the envs in the mix "
            f"(changes every {spec.mix_steps} steps)\n"
            + (f"      best of {reps} run(s) per contender, each in a fresh process" if not in_process
               else "      measured in-process (peak RSS not per contender)"))
    if "loadavg" in results:
        head += "\n      1-min load average before/after: " + " / ".join(f"{x:.2f}" for x in results["loadavg"])
    text = "\n\n".join([head, table, format_table(["check", "value", "target", "result"], check_rows, right={1})])
    ph = results.get("phases")
    if ph:
        prow = [[k, secs(s), f"{100 * s / ph['seconds']:.0f}%"] for k, s in ph["phases"].items()]
        prow.append(["sum of the phases", secs(ph["seconds"]), "100%"])
        prow.append(["whole cold load, same process: open_run().metrics()", secs(ph["cold_same_process"]),
                     f"{100 * ph['cold_same_process'] / ph['seconds']:.0f}%"])
        text += "\n\nrundash cold-load phases (one after the other, one process)\n\n"
        text += format_table(["phase", "time (s)", "share"], prow, right={1, 2})
        if ph.get("cprofile"):
            text += "\n\ncProfile of a cold load (by tottime)\n" + ph["cprofile"]
    return text, checks


# Command ------------------------------------------------------------------------------------------

def add_parser(sub) -> None:
    m = sub.add_parser("metrics", help="metrics.jsonl cold load / refresh vs pandas and pyarrow")
    defaults = md.Spec()
    m.add_argument("--steps", type=int, default=defaults.steps, help=f"training steps (default {defaults.steps})")
    m.add_argument("--keys", type=int, default=defaults.keys, help=f"distinct keys per producer (default {defaults.keys})")
    m.add_argument("--refresh-repeat", type=int, default=5, help="refresh rounds; the best counts (default 5)")
    m.add_argument("--seed", type=int, default=0)
    m.add_argument("--profile", action="store_true", help="also print a cProfile of rundash's cold load")
    add_common_options(m, "the run to DIR/bench-run (replaced if present)", repeat=1,
                       repeat_help="cold-load runs per contender, interleaved",
                       in_process_help="measure in this process (fast, for tests; peak RSS is then not per contender)")
    m.set_defaults(func=cmd_metrics)


def cmd_metrics(args) -> int:
    spec = md.Spec(steps=args.steps, keys=args.keys, seed=args.seed)
    with work_root(args.dir, "rundash-bench-metrics-") as root:
        run_dir = os.path.join(root, "bench-run")
        print(f"generating {spec.steps:,} steps × {spec.keys} keys/producer into {run_dir} …", flush=True)
        gen = md.generate_run(run_dir, spec)
        print(f"generated {gen.bytes / 1e6:,.1f} MB ({gen.lines:,} lines) in {gen.seconds:.1f} s", flush=True)

        def one(contender: str, **kwargs) -> dict:
            return run_one("metrics", contender, {"path": gen.path, **kwargs}, in_process=args.in_process)

        load0 = os.getloadavg()[0]
        results: dict = best_of("metrics", ("rundash", "pyarrow", "pandas"), {"path": gen.path},
                                repeat=args.repeat, in_process=args.in_process)
        for best in results.values():  # the report's RSS: the peak over every run of a contender
            best.update(peak_rss_mb=max(best.pop("all_peak_rss_mb")), delta_rss_mb=max(best.pop("all_delta_rss_mb")))
        print("verifying the tidy frame against an independent merge …", flush=True)
        results["verify"] = one("verify")
        print("timing cold-load phases …", flush=True)
        results["phases"] = one("phases", profile=args.profile)
        print("measuring refresh after appending rows …", flush=True)
        results["refresh"] = one("refresh", spec=asdict(spec), refresh_repeat=args.refresh_repeat)
        results["loadavg"] = [load0, os.getloadavg()[0]]
        text, checks = build_report(gen, spec, results, args.in_process)
        print_report(text, args.json, {"generated": asdict(gen), "spec": asdict(spec), "results": results,
                                       "checks": checks})
        return 0 if (checks["tidy_ok"] and checks["refresh_rows_ok"]) else 1
