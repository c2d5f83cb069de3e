"""The eval pane (`rundash_core.views.eval_pane`, prime-rl spec 8.2) on the shipped prime-rl sample run:
its metrics and plan (`tests/data/prime-rl`) joined with its traces (`tests/data/prime-rl-traces`)
into one run dir, references read with json.loads."""
from __future__ import annotations

import json
import re
import shutil

import pandas as pd
import pytest

import rundash_core as rd
from rundash_core.views import eval_pane as ep

from helpers import DATA, NEW_NAME, NEW_RUN, copy_run


@pytest.fixture
def full_run(tmp_path):
    run = copy_run(NEW_RUN, tmp_path)
    shutil.copytree(DATA / "prime-rl-traces" / NEW_NAME / "monitors" / "file" / "traces",
                    run / "monitors" / "file" / "traces")
    return run


def _index_rows(run) -> list[dict]:
    path = run / "monitors" / "file" / "traces" / "stream.index.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_plan_progress_and_problems(full_run):
    run = rd.open_run(full_run)
    plan_json = json.loads((full_run / "monitors" / "file" / "plan.json").read_text())
    plan = run.eval_plan()
    assert {(e, s): x for e, s, x in zip(plan["env"], plan["step"], plan["expected"])} == \
        {(env, int(s)): n for env, steps in plan_json.items() for s, n in steps.items()}
    samples = run.samples()
    blocks = ep.progress(plan, samples).set_index(["env", "step"])
    evals = [r for r in _index_rows(full_run) if r["kind"] == "eval"]
    assert evals
    done = samples[samples["split"] == "eval"].groupby(["env", "step"]).size()
    for key, row in blocks.iterrows():
        assert row["done"] == min(int(done.get(key, 0)), row["expected"])
        assert row["share"] == pytest.approx(row["done"] / row["expected"])
    # half a plan done: a block that has no episodes yet is at 0
    plan_json["gsm8k"]["12"] = 4
    (full_run / "monitors" / "file" / "plan.json").write_text(json.dumps(plan_json))
    blocks = ep.progress(run.eval_plan(), samples).set_index(["env", "step"])
    assert blocks.loc[("gsm8k", 12), "done"] == 0 and blocks.loc[("gsm8k", 12), "share"] == 0
    (full_run / "monitors" / "file" / "plan.json").write_text('{"gsm8k": {"x": 1, "4": true}}')
    assert run.eval_plan().empty
    assert any(p.path.endswith("plan.json") and "2 entries" in p.what for p in run.problems())
    (full_run / "monitors" / "file" / "plan.json").write_bytes(b"\x00{")
    assert run.eval_plan().empty and any(p.what == "not valid JSON" for p in run.problems())


def test_tiles_beeswarm_usage_timing(full_run):
    run = rd.open_run(full_run)
    rows = {}
    for line in (full_run / "monitors" / "file" / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        if row.get("step") is None:
            continue
        for k, v in row.items():
            if (m := re.match(r"^eval/([^/]+)/(?:all|effective)/agent/((?:avg|pass)@\d+)$", k)):
                rows.setdefault((m.group(1), m.group(2)), {})[row["step"]] = v
    tiles = ep.tiles(run.validation()).set_index(["env", "statistic"])
    assert set(tiles.index) == set(rows)
    for key, by_step in rows.items():
        steps = sorted(by_step)
        assert tiles.loc[key, "value"] == pytest.approx(by_step[steps[-1]])
        assert tiles.loc[key, "change"] == pytest.approx(by_step[steps[-1]] - by_step[steps[-2]])
    samples = run.samples()
    evals = [r for r in _index_rows(full_run) if r["kind"] == "eval"]
    fig = ep.beeswarm_figure(samples)
    assert sorted(fig.data[0].y) == sorted(r["reward"] for r in evals if r["reward"] is not None)
    assert fig.data[0].x == ep.beeswarm_figure(samples).data[0].x  # the same spread on every rerun
    use = ep.usage(samples).set_index("env")
    assert use.loc["gsm8k", "episodes"] == len(evals)
    assert use.loc["gsm8k", "output_tokens"] == sum(r["output_tokens"] for r in evals)
    assert use.loc["gsm8k", "input_tokens"] == sum(r["input_tokens"] for r in evals)
    times = ep.timing(run.metrics()).set_index("phase")["seconds"]
    last = max(json.loads(ln)["step"] for ln in (full_run / "monitors/file/metrics.jsonl").read_text().splitlines()
               if "eval/gsm8k/all/agent/timing/agent/model/mean" in ln)
    want = [json.loads(ln) for ln in (full_run / "monitors/file/metrics.jsonl").read_text().splitlines()
            if json.loads(ln).get("step") == last and "eval/gsm8k/all/agent/timing/agent/model/mean" in ln][-1]
    assert times["agent/model"] == pytest.approx(want["eval/gsm8k/all/agent/timing/agent/model/mean"])
    assert times["agent/harness"] == pytest.approx(want["eval/gsm8k/all/agent/timing/agent/harness/mean"])
    bars = {t.name: t.x[0] for t in ep.timing_figure(ep.timing(run.metrics())).data}
    assert bars["model"] == pytest.approx(times["agent/model"]) and "tools / harness" in bars


def test_parse_plan_rules():
    plan, problem = ep.parse_plan(b'{"a": {"0": 3, "10": 2}, "b": {"5": 1}, "c": [1]}')
    assert list(zip(plan["env"], plan["step"], plan["expected"])) == [("a", 0, 3), ("b", 5, 1), ("a", 10, 2)]
    assert problem == "1 entries are not step → episode counts"
    empty, problem = ep.parse_plan(b"[]")
    assert empty.empty and problem == "not a JSON object"
    assert pd.api.types.is_integer_dtype(plan["expected"])
