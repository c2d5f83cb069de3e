"""`rundash status RUN_DIR [--json]` and `rundash check-in RUN_DIR`: a run's health in a terminal.

One command for an agent or a person checking on a run, over the same frames as the dashboard:
the run card, the latest value of each section's key metrics and the health findings (a short
table, or JSON with the schema `STATUS_SCHEMA` documented in docs/cli.md), or the monitor-run
check-in entry as Markdown. Reads only; exit code 2 when the run cannot be opened.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time

from rundash_core.health.checkin import checkin_markdown
from rundash_core.health.checks import Signals, health, health_state, json_safe
from rundash_core.io import files
from rundash_core.overview import summary_fields
from rundash_core.run import RunError
from rundash_core.views.display_text import format_duration, format_time, text_or
from rundash_core.views.key_numbers import key_metrics

STATUS_SCHEMA = "rundash.status/1"
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # terminal escapes from run text (metric names, paths)


def printable(text: str) -> str:
    """Text for a terminal: control characters (ANSI escapes) from run data shown as `?`."""
    return _CONTROL.sub("?", text)


def _parser(verb: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=f"rundash {verb}", description=__doc__.splitlines()[0])
    p.add_argument("run_dir", help="a run directory (or a verl / SWE-Lego-RL console log)")
    if verb == "status":
        p.add_argument("--json", action="store_true", help=f"print JSON ({STATUS_SCHEMA}, see docs/cli.md)")
    return p


def _open(path: str):
    """The run at `path`, or a RunError whose message says why not (missing, outside the roots)."""
    from rundash_core.sources import open_run

    full = os.path.abspath(os.path.expanduser(path))
    if not os.path.exists(full):
        raise RunError(f"{full}: no such file or directory")
    if not files.inside_roots(full):
        roots = ", ".join(files.allowed_roots() or ())
        raise RunError(f"{full} is outside the allowed roots ({roots}); set RUNDASH_ROOTS to include it")
    return open_run(full)


def status_dict(run, *, now: float | None = None) -> dict:
    """What `rundash status --json` prints (schema `rundash.status/1`)."""
    now = time.time() if now is None else now
    signals = Signals.from_run(run, now=now)
    findings = health(signals)
    ov = signals.overview
    card = summary_fields(ov)  # the run's one summary, as the card and the runs list show it
    card["run_id"] = run.run_id
    sections: dict[str, list] = {}
    for km in key_metrics(signals):
        sections.setdefault(km.section, []).append({"metric": km.metric, "step": km.step, "value": km.value})
    return json_safe({
        "schema": STATUS_SCHEMA, "generated": _iso(now), "run": card, "health": health_state(findings),
        "sections": [{"section": s, "metrics": m} for s, m in sections.items()],
        "findings": [f.to_dict() for f in findings],
        "problems": [str(p) for p in run.problems()]})


def _iso(now: float) -> str:
    import pandas as pd

    return pd.Timestamp(now, unit="s", tz="UTC").isoformat()


def _fmt(value) -> str:
    return "—" if value is None else f"{value:.4g}" if isinstance(value, float) else str(value)


def _ts(value):
    """A JSON time (ISO text, as `json_safe` writes it) back to a Timestamp for `format_time`."""
    import pandas as pd

    return None if value is None else pd.Timestamp(value)


def status_text(data: dict) -> str:
    """The short human table of `status_dict`."""
    r = data["run"]
    step = f"{_fmt(r['step'])} / {_fmt(r['max_steps']) if r['max_steps'] is not None else '∞'}"
    trainer = " · ".join(str(v) for v in (r.get("project"), r.get("experiment")) if v)
    resumed = ", ".join(str(s) for s in r.get("resumed_from") or [])
    lines = [f"{r['name']}  ({r['kind']}, {r['flavor']})" + (f"  {trainer}" if trainer else ""),
             f"  path      {r['path']}",
             f"  status    {r['status']}   step {step}   health {data['health']}",
             f"  model     {text_or(r['model'], 'n/a')}   attempts {r['attempts']}"
             + (f" (resumed from step {resumed})" if resumed else "") + f"   duration {format_duration(r['duration_s'])}",
             f"  created   {format_time(_ts(r['created']))}   updated {format_time(_ts(r['updated']))}"]
    for sec in data["sections"]:
        lines.append(f"\n{sec['section']}")
        width = max(len(m["metric"]) for m in sec["metrics"])
        lines += [f"  {m['metric']:<{width}}  {_fmt(m['value']):>10}  @ {_fmt(m['step'])}" for m in sec["metrics"]]
    lines.append(f"\nFindings ({len(data['findings'])})")
    for f in data["findings"] or []:
        a, b = f["step_start"], f["step_end"]
        steps = "" if a is None else f"step {a}" if b in (None, a) else f"steps {a}–{b}"
        lines.append(f"  {f['severity']:<8} {f['area']:<11} {f['message']}  {steps}".rstrip())
    if not data["findings"]:
        lines.append("  none")
    if data["problems"]:
        lines.append(f"\nFile problems ({len(data['problems'])})")
        lines += [f"  {p}" for p in data["problems"]]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    verb = argv[0] if argv else "status"
    args = _parser(verb).parse_args(argv[1:])
    try:
        run = _open(args.run_dir)
        if verb == "check-in":
            now = time.time()
            signals = Signals.from_run(run, now=now)
            print(printable(checkin_markdown(signals, health(signals), problems=run.problems(), now=now)))
            return 0
        data = status_dict(run)
    except (RunError, OSError) as e:
        print(f"rundash {verb}: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 - what no reader foresaw: a message naming the run, no traceback
        print(f"rundash {verb}: could not read {args.run_dir}: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    try:
        print(json.dumps(data, indent=2, ensure_ascii=False) if args.json else printable(status_text(data)))
    except BrokenPipeError:  # `rundash status RUN | head`
        sys.stderr.close()
    return 0

