"""One summary of a run (`Run.overview()`): every surface shows the same name, step, max steps,
status, duration, created, updated, model and resumes: the runs list frame, `rundash status
--json`, the terminal card (`card_doc`), Compare's runs table and the web card (the Overview page
through AppTest, read back as a reader sees it), over every demo run and every run under tests/data.
Plus what the summary now reads from the whole verl log (its pass, appended bytes only): a duration and
an estimated `updated` for a log stamped only at its head, and verl's resume prints (`Resuming from
…/global_step_N`).

`python tests/pages/test_one_summary.py [DIR ...]` prints the surface × field table (default: tests/data
and ../shared/samples)."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time

import pandas as pd
import pytest

import rundash_core as rd
from rundash_core.compare import runs_summary
from rundash_core.overview import resumes_text
from rundash_core.serve.cli_status import status_dict
from rundash_core.sources.verl import whole_pass as verl_pass
from rundash_core.tui.views import card_doc
from rundash_core.views.display_text import format_duration, format_time, step_headline, text_or

from helpers import DATA, REPO

RESUMED = DATA / "verl-resume" / "dq_math_resumed.log"
FIELDS = ("name", "step", "max_steps", "status", "duration", "created", "updated", "model", "resumes")


def _ts(value):
    return None if value is None or value is pd.NaT or (isinstance(value, float) and value != value) else pd.Timestamp(value)


def _shown(name, step, max_steps, status, duration, created, updated, model, attempts, resumed_from) -> dict:
    """One surface's values as the card writes them (headline, duration, times, resumes)."""
    absent = lambda v: v is None or v is pd.NA or (isinstance(v, float) and v != v)  # noqa: E731
    ov = rd.Overview(run_id="", name="", kind="", path="", attempts=int(attempts),
                     resumed_from=[int(s) for s in (resumed_from or [])])
    return {"name": name, "step": step_headline(None if absent(step) else int(step),
                                                None if absent(max_steps) else int(max_steps)),
            "max_steps": None if absent(max_steps) or absent(step) else int(max_steps),  # (shown with a step)
            "status": status,
            "duration": format_duration(None if absent(duration) else float(duration)),
            "created": format_time(_ts(created)), "updated": format_time(_ts(updated)),
            "model": text_or(model, "n/a"), "resumes": resumes_text(ov)}


def from_overview(ov) -> dict:
    return _shown(ov.name, ov.step, ov.max_steps, ov.status, ov.duration_s, ov.created, ov.updated, ov.model,
                  ov.attempts, ov.resumed_from)


def from_fields(r) -> dict:
    """A row of the runs list, of Compare's runs table, or `rundash status --json`'s `run`."""
    return _shown(r["name"], r["step"], r["max_steps"], r["status"], r["duration_s"], r["created"], r["updated"],
                  r["model"], r["attempts"], r["resumed_from"])


def from_tui(doc) -> dict:
    """The terminal card's text read back: its headline, name line and `label value` lines."""
    lines = doc.text.splitlines()
    values = {m.group(1): m.group(2) for line in lines if (m := re.match(r"^(\w[\w ]*?) {2,}(.*)$", line))}
    top = re.search(r" of (\d+)$", lines[0])
    return {"name": lines[1].split(" · ")[0], "step": lines[0], "max_steps": int(top.group(1)) if top else None,
            "status": values["status"], "duration": values["duration"], "created": values["created"],
            "updated": values["updated"], "model": values["model"], "resumes": values["resumes"]}


CARD_LABELS = ("STATUS", "DURATION", "MODEL", "RESUMES", "CREATED", "UPDATED")
APP = REPO / "app.py"


def _plain(markdown: str) -> str:
    """Markdown as the reader sees it: no bold stars, no escapes."""
    return re.sub(r"\\(.)", r"\1", markdown.strip().removeprefix("**").removesuffix("**"))


def web_card(folder, run_id: str) -> dict:
    """The Overview page's run card (Streamlit, through AppTest over `folder` with `?run=`), read back:
    its headline, name caption and `LABEL` / value fields (the UPDATED field is the page's, under it)."""
    from streamlit.testing.v1 import AppTest

    from rundash_core import cache
    from rundash_core.io import files

    saved = {k: os.environ.get(k) for k in ("RUNDASH_DIRS", "RUNDASH_ROOTS")}
    os.environ["RUNDASH_DIRS"] = str(folder)
    os.environ.pop("RUNDASH_ROOTS", None)
    cache.shared.clear()
    try:
        at = AppTest.from_file(str(APP), default_timeout=120)
        at.query_params["run"] = run_id
        at.run()
        at.switch_page("pages/overview.py").run()
    finally:
        files.set_roots(None)  # (the app restricts reads to its dirs for the whole process)
        for k, v in saved.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
    assert not at.exception, [e.value for e in at.exception]
    values, label = {}, None
    for node in at.main:  # in page order: a field is its caption (label), then its markdown (value)
        kind, value = getattr(node, "type", None), getattr(node, "value", None)
        if kind == "caption":
            label = value if value in CARD_LABELS else None
        elif kind == "markdown" and label is not None:
            values.setdefault(label, _plain(value))
            label = None
    headline = next(_plain(m.value.lstrip("# ")) for m in at.main.markdown if m.value.startswith("## "))
    top = re.search(r" of (\d+)$", headline)
    status = re.match(r"^:\w+\[● (\w+)\]$", values["STATUS"])
    name = next(_plain(c.value).split(" · ")[0] for c in at.caption if " · " in c.value)
    return {"name": name, "step": headline, "max_steps": int(top.group(1)) if top else None,
            "status": status.group(1) if status else values["STATUS"], "duration": values["DURATION"],
            "created": values["CREATED"], "updated": values["UPDATED"], "model": values["MODEL"],
            "resumes": values["RESUMES"]}


def surfaces(dirs, now: float, web: bool = True) -> dict[str, dict[str, dict]]:
    """run_id → surface → the fields it shows, every surface read at one `now`."""
    frame = rd.discover(dirs, now=now)
    runs = {r.run_id: rd.open_run(r.path, run_id=r.run_id) for r in frame.itertuples()}
    overviews = {rid: run.overview(now) for rid, run in runs.items()}
    table = runs_summary(overviews).set_index("run")
    out = {}
    for r in frame.to_dict("records"):
        rid, run = r["run_id"], runs[r["run_id"]]
        out[rid] = {"overview": from_overview(overviews[rid]), "runs list": from_fields(r),
                    "status --json": from_fields(json.loads(json.dumps(status_dict(run, now=now)))["run"]),
                    "tui card": from_tui(card_doc(run.overview(now))),
                    "compare": from_fields({**table.loc[rid].to_dict(), "name": table.loc[rid, "name"]})}
        if web:
            out[rid]["web card"] = _web_at_now(run, now, os.pathsep.join(map(str, dirs)), rid)
    return out


def _web_at_now(run, now: float, folder, rid: str) -> dict:
    """The web card, read a few seconds after `now`: a running run's duration ticks meanwhile, so
    it must be the summary's duration at a moment of the read (then it is reported as at `now`)."""
    before = time.time()
    card = web_card(folder, rid)
    after = time.time()
    ov = run.overview(now)
    if ov.status == "running" and card["duration"] != from_overview(ov)["duration"]:
        during = {from_overview(run.overview(t))["duration"] for t in range(int(before), int(after) + 2)}
        if card["duration"] in during:
            card["duration"] = from_overview(ov)["duration"]
    return card


def disagreements(found: dict) -> list[str]:
    return [f"{rid} {field}: " + ", ".join(f"{s}={v[field]!r}" for s, v in by.items())
            for rid, by in found.items() for field in FIELDS if len({repr(v[field]) for v in by.values()}) > 1]


@pytest.fixture(scope="module")
def demo_folder(tmp_path_factory):
    from rundash_core import demo

    return demo.ensure_demo(tmp_path_factory.mktemp("demo") / "demo")


W_AND_B_FOLDER = re.compile(r"^(?:offline-)?run-\d{8}_\d{6}-[0-9a-z]+$")  # wandb's stamp, not a name


def test_every_surface_shows_the_one_summary_of_every_demo_and_test_run(demo_folder):
    now = time.time()
    found = {**surfaces([demo_folder], now), **surfaces([DATA], now)}
    assert len(found) >= 25 and {"verl", "prime-rl", "swe-lego-rl", "relax"} <= set(rd.discover([demo_folder])["kind"])
    assert all(set(by) == {"overview", "runs list", "status --json", "tui card", "compare", "web card"}
               for by in found.values())
    assert disagreements(found) == []
    for rid, by in found.items():  # the name is the run's own (folder or log stem), as the runs list ids it;
        ov = by["overview"]        # a W&B run's is the name it was given (wandb.init(name=...)), its folder a stamp
        stem = rid.split(":")[-1].split("@")[0]
        assert stem == ov["name"] or W_AND_B_FOLDER.match(stem), rid


def test_the_real_cli_prints_the_summary(tmp_path):
    log = tmp_path / "dq_math_resumed.log"
    shutil.copy(RESUMED, log)
    env = {k: v for k, v in os.environ.items() if k != "RUNDASH_ROOTS"}
    out = subprocess.run([sys.executable, "-m", "rundash_core.serve.cli", "status", str(log), "--json"],
                         capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr
    shown, ov = from_fields(json.loads(out.stdout)["run"]), from_overview(rd.open_run(log).overview())
    assert shown == ov and shown["name"] == "dq_math_resumed" and shown["resumes"] == "1 (resumed from step 20)"
    text = subprocess.run([sys.executable, "-m", "rundash_core.serve.cli", "status", str(log)], capture_output=True,
                          text=True, timeout=300, env=env).stdout
    assert f"duration {ov['duration']}" in text and "duration n/a" not in text
    assert "verl_gpg_example_gsm8k_math · qwen2_7b_function_rm" in text  # the trainer's names, second


def test_a_log_stamped_only_at_its_head_gets_a_duration_and_an_estimated_updated():
    """The real era-S1 log prints wall-clock times only in its head; its steps time their parts
    (`timing/gen`, `timing/update_actor`, …): the duration sums them, updated = start + that."""
    log = DATA / "verl" / "eh_Qwen2.5-0.5B-bsz256_2-prompt1024-resp512-0.567.log"
    run = rd.open_run(log)
    ov = run.overview()
    tidy = run.metrics()
    parts = tidy[tidy["metric"].astype(str).str.startswith("timing/")]
    assert ov.duration_s == pytest.approx(parts["value"].sum(), rel=1e-6) and ov.duration_s > 3600
    assert ov.created is not None and ov.created == ov.started  # the head's first stamp
    assert (ov.updated - ov.created).total_seconds() == pytest.approx(ov.duration_s, abs=1)
    row = rd.discover([log]).iloc[0]
    assert row["updated"] == ov.updated and row["duration_s"] == pytest.approx(ov.duration_s)


def test_a_resume_print_is_a_resume_of_the_card_and_a_marker_on_the_charts():
    """The real log resumed from the step-20 checkpoint (its first step is 21): one resume, from
    step 20, marked at 20 on the charts (`resume_steps`, what the Metrics page draws)."""
    run = rd.open_run(RESUMED)
    ov = run.overview()
    assert (ov.step, ov.attempts, ov.resumed_from, run.resume_steps(), run.attempts()) == (30, 2, [20], [20], [1, 2])
    assert int(run.metrics()["step"].min()) == 21
    assert resumes_text(ov) == "1 (resumed from step 20)"
    assert re.search(r"^resumes +1 \(resumed from step 20\)$", card_doc(ov).text, re.M)
    tidy = run.metrics()
    assert ov.duration_s == pytest.approx(tidy[tidy["metric"] == "timing_s/step"]["value"].sum())


def test_a_resume_appended_to_the_same_log_is_read_from_the_appended_bytes_only(tmp_path, monkeypatch):
    """The first launch, then the resumed one appended (`tee -a`): the pass reads only what was
    appended (counted by the bytes it reads), and the summary then says two attempts."""
    lines = RESUMED.read_bytes().splitlines(keepends=True)
    cut = next(i for i, ln in enumerate(lines) if b"Load from checkpoint folder" in ln)
    steps = [ln for ln in (DATA / "verl" / "dq_math.log").read_bytes().splitlines(keepends=True)
             if re.search(rb"\) step:(?:[1-9]|1\d|20) - ", ln)]  # the real log's steps 1-20
    first = b"".join(lines[:cut]) + b"".join(steps)
    log = tmp_path / "run.log"
    log.write_bytes(first)
    before = rd.open_run(log).overview()
    assert (before.attempts, before.resumed_from) == (1, [])
    seen = []
    real = verl_pass._read
    monkeypatch.setattr(verl_pass, "_read", lambda acc, data: (seen.append(len(data)), real(acc, data)))
    with open(log, "ab") as fh:
        fh.write(RESUMED.read_bytes())
    after = rd.open_run(log).overview()
    assert sum(seen) == RESUMED.stat().st_size  # the appended bytes, not the whole log again
    assert (after.attempts, after.resumed_from, rd.open_run(log).resume_steps()) == (2, [20], [20])


def survey(dirs) -> str:
    """The cross-surface table (run × surface × field) for `dirs`, as text."""
    found, now = {}, time.time()
    for d in dirs:
        if os.path.isdir(d):
            found.update({f"{os.path.basename(os.path.normpath(d))}/{k}": v for k, v in surfaces([d], now).items()})
    rows = [[rid, surface, *(str(v[f]) for f in FIELDS)] for rid, by in found.items() for surface, v in by.items()]
    widths = [max(len(str(x)) for x in col) for col in zip(["run", "surface", *FIELDS], *rows)]
    fmt = lambda r: "| " + " | ".join(str(x).ljust(w) for x, w in zip(r, widths)) + " |"  # noqa: E731
    bad = disagreements(found)
    return "\n".join([fmt(["run", "surface", *FIELDS]), fmt(["-" * w for w in widths]), *map(fmt, rows),
                      f"\n{len(found)} runs, {len(bad)} disagreements", *bad])


if __name__ == "__main__":
    print(survey(sys.argv[1:] or [str(DATA), str(REPO.parent / "shared" / "samples")]))
