"""`python -m benchmarks <subcommand>`.

Subcommands:

- `metrics`: a ~200 MB synthetic prime-rl metrics.jsonl; rundash's cold load and refresh against
  pandas.read_json and pyarrow.json.read_json, with the tidy frame verified (see `metrics`).

- `verl`: a ~100 MB verl console log; rundash's parse against the usual per-line approach and the
  bare line read, with the values verified (see `verl`).

- `discovery`: 600 verl console logs of ~1 MB; rundash's cold and warm `rd.discover` against a bare
  `os.scandir` + `stat` (the floor) and a whole-file scan for the last step (see `discovery`).

- `charts`: a 20k-step × 300-metric prime-rl run; the Metrics page's figures of one section and of
  the all-metrics view filtered to 50 keys against loading the frame (see `charts`).

- `sessions`: N browser sessions (one Chromium, N contexts) on the demo's live run: time to the
  first chart per session, charts advancing, server CPU per refresh period and RSS against one
  session, and a catastrophic regex in one session against another's page (see `sessions`).

- `pages`: the app on the demo in Chromium (Playwright); time to the first chart on Metrics and
  Compare and to the runs table on Overview against a bare page drawing one plotly chart (see `pages`).

- `logs`: a 2 GB log and three 100 MB ones; the Logs page's tail, merged tail, regex filter and
  "load older" reads (bytes read, peak RSS) against reading the last 1 MB with one seek (see `logs`).

- `traces`: a ≥ 1 GB prime-rl trace stream in sealed seekable chunks plus a live chunk; listing one
  step's samples and opening one episode by id against decompressing a whole chunk (see `traces`).

`_one <bench> <contender> <kwargs JSON>` is internal: it measures one contender in this (fresh)
process and prints one JSON line (see `common.run_one`).
"""
from __future__ import annotations

import argparse
import json
import sys

from benchmarks import charts, discovery, logs, metrics, pages, sessions, traces, verl
from benchmarks.common import measure_here


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks",
                                     description="Benchmarks of rundash against pandas and pyarrow.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{metrics,verl,discovery,charts,pages,sessions,logs,traces}")
    metrics.add_parser(sub)
    verl.add_parser(sub)
    discovery.add_parser(sub)
    charts.add_parser(sub)
    pages.add_parser(sub)
    sessions.add_parser(sub)
    logs.add_parser(sub)
    traces.add_parser(sub)
    one = sub.add_parser("_one")  # internal, left out of the usage line
    one.add_argument("bench", choices=["metrics", "verl", "discovery", "charts", "logs"])
    one.add_argument("contender")
    one.add_argument("kwargs", type=json.loads, help="keyword arguments of the bench's measure(), as JSON")
    one.set_defaults(func=lambda a: print(json.dumps(measure_here(a.bench, a.contender, a.kwargs))) or 0)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
