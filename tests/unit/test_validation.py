"""Validation of every kind (`rundash_core.views.validation`, `sources/harbor_val.py`, `failure_modes.py`).

References (here and in `helpers/lego_validation.py`) are written from the format notes, not from rundash's code: verl val lines split at
` - ` and the last `:`, prime-rl metrics rows with json.loads, Relax eval rows with json.loads,
Harbor trials with json.load (swe-lego-rl.md sections 6-8: first copy = smallest path, cohort =
tasks in at least half the events, CoT counts per 7.1).
"""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pandas as pd
import pytest

import rundash_core as rd
from rundash_core import frames
from rundash_core.views import validation as val
from rundash_core.views import validation_charts as vc

from helpers import DATA, NEW_RUN, copy_run
from helpers.lego_validation import EXP, VAL_DATA, VAL_LOG, VAL_TRIALS, ref_cohort, ref_first_copies, trial_reward

FULL_LOG = DATA / "lego-full" / "logs" / f"{EXP}.log"
DQ_MATH = DATA / "verl" / "dq_math.log"
LEGACY = DATA / "verl" / "eh_Qwen2.5-0.5B-bsz256_2-prompt1024-resp512-0.567.log"
RELAX = DATA / "relax" / "relax-run"


# The key grammars -----------------------------------------------------------------------------------
def test_verl_key_grammar():
    k = val.parse_val_key("val-core/DigitalLearningGmbH/MATH-lighteval/reward/mean@1")
    assert (k.source, k.var, k.metric, k.core) == ("DigitalLearningGmbH/MATH-lighteval", "reward", "mean@1", True)
    k = val.parse_val_key("val-aux/a/b:c/acc/best@16/std")  # a data source may hold / and :
    assert (k.source, k.var, k.metric, k.core) == ("a/b:c", "acc", "best@16/std", False)
    assert val.parse_val_key("val-core/aime_2025/acc/maj@30/mean").metric == "maj@30/mean"
    assert val.parse_val_key("val-aux/num_turns/max") == val.ValKey("all", "", "num_turns/max", False)
    assert val.parse_val_key("val/test_score/openai/gsm8k") == val.ValKey("openai/gsm8k", "", "test_score", True)
    assert val.parse_val_key("test_score/openai/gsm8k").source == "openai/gsm8k"
    assert val.parse_val_key("val/loss") == val.ValKey("all", "", "loss", True)
    for other in ("critic/score/mean", "val-core/x/reward/median@4", "eval/gsm8k/all/agent/avg@4"):
        assert val.parse_val_key(other) is None


def _tidy(rows: list[tuple]) -> pd.DataFrame:
    return pd.DataFrame({"step": pd.array([r[0] for r in rows], dtype="Int64"), "time": 0.0,
                         "metric": [r[1] for r in rows], "value": [float(r[2]) for r in rows], "producer": "trainer"})


def test_core_variable_and_statistic_names():
    """Spec 9.1: `acc` is the core variable where a source has it, so its `reward` keys carry the
    variable in their statistic; the last value logged per step and key wins."""
    tidy = _tidy([(0, "val-core/aime/acc/mean@30", 0.2), (0, "val-aux/aime/reward/mean@30", 0.5),
                  (0, "val-aux/aime/acc/std@30", 0.1), (0, "val-core/gsm/reward/mean@1", 0.7),
                  (5, "val-core/aime/acc/mean@30", 0.3), (5, "val-core/aime/acc/mean@30", 0.35),
                  (5, "critic/score/mean", 9.0)])
    v = val.metrics_validation(tidy)
    assert frames.check(v, frames.VALIDATION) == []
    got = {(e, s, st): (x, c) for e, s, st, x, c in zip(v["event"], v["source"], v["statistic"], v["value"], v["core"])}
    assert got == {("step 0", "aime", "mean@30"): (0.2, True), ("step 0", "aime", "reward/mean@30"): (0.5, False),
                   ("step 0", "aime", "std@30"): (0.1, False), ("step 0", "gsm", "mean@1"): (0.7, True),
                   ("step 5", "aime", "mean@30"): (0.35, True)}


def _ref_log_val(path: Path, pattern: str) -> dict:
    """(step, key) -> value of every val key on the log's metric lines (last colon, np.* unwrapped);
    S1 logs (verl.md 7) print the initial and the final validation only as pprint dicts: rows at
    step 0 and at the last logged step (unless a line already has the key there)."""
    out, last = {}, 0
    text = path.read_text(errors="replace")
    for when, body in re.findall(r'"(Initial|Final) validation metrics: (\{.*\})"', text):
        for key, value in ast.literal_eval(body).items():
            out[("initial" if when == "Initial" else "final", "val/" + key)] = float(value)
    for line in text.splitlines():
        m = re.search(r"step:(\d+) - (.*)$", line)
        if not m:
            continue
        for seg in m.group(2).split(" - "):
            key, _, value = seg.rpartition(":")
            if re.match(pattern, key):
                value = re.sub(r"^np\.\w+\((.*)\)$", r"\1", value.strip())
                out[(int(m.group(1)), key)] = float(value)
            last = max(last, int(m.group(1)))
    at = {"initial": 0, "final": last}
    return {(at.get(s, s), k): x for (s, k), x in out.items() if s not in at or (at[s], k) not in out}


@pytest.mark.parametrize("log, pattern, source_of", [
    (DQ_MATH, r"^val-core/", lambda k: k.split("/", 1)[1].rsplit("/", 2)[0]),
    (LEGACY, r"^val/test_score/", lambda k: k[len("val/test_score/"):]),
])
def test_verl_logs_val_scores(log, pattern, source_of):
    ref = _ref_log_val(log, pattern)
    v = rd.open_run(log).validation()
    assert len(ref) > 10 and len(v[v["core"]]) == len(ref)
    got = {(s, src): x for s, src, x in zip(v["step"], v["source"], v["value"])}
    for (step, key), value in ref.items():
        assert got[(step, source_of(key))] == pytest.approx(value, abs=1e-9)
    assert list(v["step"]) == sorted(v["step"])


def test_prime_rl_eval_metrics():
    ref = {}
    for line in (NEW_RUN / "monitors" / "file" / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        for k, x in row.items():
            m = re.match(r"^eval/([^/]+)/(?:all|effective)/agent/((?:avg|pass)@\d+)$", k)
            if m and row.get("step") is not None:
                ref[(row["step"], m.group(1), m.group(2))] = x  # last row wins
    v = rd.open_run(NEW_RUN).validation()
    core = v[v["core"]]
    assert ref and {(s, e, st): x for s, e, st, x in zip(core["step"], core["source"], core["statistic"], core["value"])} \
        == pytest.approx(ref)
    assert set(v.loc[~v["core"], "statistic"]) == {"pass^2", "all/reward/mean", "effective/reward/mean"}


def test_relax_eval_rows_by_dataset():
    ref: dict = {}
    for f in (RELAX / "rollout_result" / "eval").glob("*.jsonl"):
        for line in f.read_text().splitlines():
            row = json.loads(line)
            r = row["reward"]["score"] if isinstance(row["reward"], dict) else row["reward"]
            if r is not None:
                ref.setdefault((int(f.stem), row["dataset"]), []).append(float(r))
    v = rd.open_run(RELAX).validation()
    means = v[v["statistic"] == "mean"]
    assert {(s, d): (x, n) for s, d, x, n in zip(means["step"], means["source"], means["value"], means["n"])} == \
        {k: (pytest.approx(sum(r) / len(r)), len(r)) for k, r in ref.items()}
    solved = v[v["statistic"] == "solved"].set_index(["step", "source"])["value"]
    for k, r in ref.items():
        assert solved[k] == pytest.approx(sum(x > 0 for x in r) / len(r))


# SWE-Lego-RL: events, capabilities, breakdown -------------------------------------------------------
def test_per_capability_pass_at_1_and_change():
    folders = ["step_0001", "step_0066", "step_0131", "step_0196"]
    firsts = ref_first_copies(VAL_TRIALS, folders)
    cohort = set(ref_cohort(firsts))
    v = rd.open_run(VAL_LOG).validation()
    caps = v[v["statistic"] == "pass@1"]
    for f in folders:
        per: dict[str, list[float]] = {}
        for task, trial in firsts[f].items():
            if task in cohort:
                per.setdefault(re.sub(r"-\d+$", "", task), []).append(trial_reward(trial) > 0)
        mine = caps[caps["event"] == f].set_index("source")
        assert set(mine.index) == set(per)
        for cap, solved in per.items():
            assert mine.loc[cap, "value"] == pytest.approx(sum(solved) / len(solved)) and mine.loc[cap, "n"] == len(solved)
        assert not mine["core"].any()
    assert val.headline_statistic(v) == "pass@1"
    table = val.breakdown(v, "step_0131", "pass@1")
    before = caps[caps["event"] == "step_0066"].set_index("source")["value"]
    assert val.previous_event(v, "step_0131") == "step_0066"
    for cap, value, prev, change in zip(table["source"], table["value"], table["previous"], table["change"]):
        assert prev == pytest.approx(before[cap]) and change == pytest.approx(value - before[cap])
    assert val.breakdown(v, "step_0001", "pass@1")["previous"].isna().all()  # the first event


def test_a_dump_being_written_is_an_event_at_once(tmp_path):
    """step_0196 holds 12 trials (fewer than 3·n): only the log's `validate: True` start makes it an
    event, shown at once with its low coverage; without that line it is a training folder."""
    v = rd.open_run(FULL_LOG).validation()
    trials = v[(v["event"] == "step_0196") & (v["source"] == "trials")].set_index("statistic")["value"]
    assert trials["coverage"] == pytest.approx(12 / 30) and trials["low_coverage"] == 1.0
    assert vc.low_coverage_events(v) == {"step_0196"}
    work = copy_run(DATA / "lego-full", tmp_path, "w")
    log = work / "logs" / f"{EXP}.log"
    log.write_text("".join(ln for ln in log.read_text().splitlines(keepends=True) if "'global_steps': 196" not in ln))
    assert "step_0196" not in set(rd.open_run(log).validation()["event"])


# CoT share ------------------------------------------------------------------------------------------
def test_cot_counts_tool_call_arguments():
    """Spec 7.1: the response is the visible text plus the tool-call arguments; counting `content`
    alone would give a different (much larger) share."""
    args = {"command": "str_replace", "path": "/testbed/a.py", "old_str": "x = 1", "new_str": "x = 2"}
    messages = [{"role": "user", "content": "fix it"},
                {"role": "assistant", "content": "think hard</think>ok",
                 "tool_calls": [{"function": {"name": "str_replace_editor", "arguments": json.dumps(args)}}]},
                {"role": "tool", "content": "done"},
                {"role": "assistant", "content": [{"type": "text", "text": "more</think>"}, {"type": "text", "text": "!"}],
                 "tool_calls": [{"function": {"name": "finish", "arguments": {"message": "é"}}}]}]
    c = val.message_cot(messages)
    tool = len(json.dumps(args)) + len(json.dumps({"message": "é"}, ensure_ascii=False))
    assert c == {"turns": 2, "cot_chars": 10 + 4, "tool_chars": tool, "resp_chars": 20 + 13 + tool}
    content_only = 14 / 33
    assert c["cot_chars"] / c["resp_chars"] == pytest.approx(14 / (33 + tool))
    assert abs(content_only - c["cot_chars"] / c["resp_chars"]) > 0.2


def test_cot_share_over_a_fixed_cohort_with_low_coverage():
    events = pd.DataFrame({"event": ["a", "b"], "step": pd.array([10, None], dtype="Int64")})
    trials = pd.DataFrame({
        "event": ["a", "a", "a", "a", "b", "b"], "task_id": ["t1", "t2", "t3", "t4", "t1", "x9"],
        "turns": [2, 4, 6, 8, 3, 1], "cot_chars": [10, 30, 0, 50, 20, 99], "resp_chars": [100, 60, 40, 0, 40, 99]})
    cohort = ["t1", "t2", "t3", "t4"]
    c = val.cot_share(events, trials, cohort)
    assert frames.check(c, frames.VAL_COT) == []
    a, b = c.iloc[0], c.iloc[1]
    # t4 has no response chars: not kept; x9 is not in the cohort
    assert a["n"] == 3 and a["coverage"] == pytest.approx(3 / 4) and not a["low_coverage"]
    assert a["cot_ratio"] == pytest.approx((0.1 + 0.5 + 0.0) / 3)
    assert a["cot_ratio_weighted"] == pytest.approx(40 / 200)
    assert a["cot_chars"] == pytest.approx(40 / 3) and a["turns"] == pytest.approx(4)
    assert b["n"] == 1 and b["coverage"] == pytest.approx(1 / 4) and b["low_coverage"]
    assert b["cot_ratio"] == pytest.approx(0.5) and pd.isna(b["step"])
    assert val.coverage_note(1, 4) == "1/4 tasks (low coverage — indicative only)"
    fig = vc.cot_figure(c)
    main = fig.data[0]
    assert list(main.text) == ["", vc.LOW_NOTE] and main.marker.color[1] == vc.AMBER
    assert main.marker.size[1] > main.marker.size[0]
    assert val.cot_share(events, trials, cohort, sample=2)["cohort_size"].tolist() == [2, 2]


def test_fixed_cohort_is_tasks_in_at_least_half_the_events():
    te = pd.DataFrame({"task_id": ["a", "a", "b", "c", "c", "c"], "event": ["1", "2", "1", "1", "2", "3"]})
    assert val.fixed_cohort(te, 4) == ["a", "c"]
    assert val.fixed_cohort(te, 3) == ["a", "c"]  # b: 1 of 3 is less than half
    assert val.fixed_cohort(te, 2) == ["a", "b", "c"]


def _ref_trial_cot(trial: Path) -> dict | None:
    if not (trial / "result.json").exists() or not (trial / "proxy_trajectory.json").exists():
        return None
    cot = resp = tool = 0
    for m in json.loads((trial / "proxy_trajectory.json").read_text())["messages_snapshot"]:
        if m["role"] != "assistant":
            continue
        c = m.get("content") or ""
        c = c if isinstance(c, str) else "".join(p.get("text", "") for p in c)
        resp += len(c)
        if "</think>" in c:
            cot += len(c.split("</think>", 1)[0])
        for call in m.get("tool_calls") or []:
            a = call["function"]["arguments"]
            tool += len(a if isinstance(a, str) else json.dumps(a, ensure_ascii=False))
    return {"cot": cot, "resp": resp + tool}


def test_val_cot_on_the_sample_dumps():
    folders = ["step_0001", "step_0066", "step_0131", "step_0196"]
    firsts = ref_first_copies(VAL_TRIALS, folders)
    cohort = ref_cohort(firsts)[:120]
    c = rd.open_run(VAL_LOG).val_cot().set_index("event")
    assert list(c.index) == folders and list(c["step"][:3]) == [0, 1, 2] and pd.isna(c.loc["step_0196", "step"])
    for f in folders:
        kept = [r for t in cohort if t in firsts[f] and (r := _ref_trial_cot(firsts[f][t])) and r["resp"] > 0]
        row = c.loc[f]
        assert row["n"] == len(kept) and row["cohort_size"] == len(cohort) == 30
        assert row["cot_ratio"] == pytest.approx(sum(r["cot"] / r["resp"] for r in kept) / len(kept))
        assert row["cot_ratio_weighted"] == pytest.approx(sum(r["cot"] for r in kept) / sum(r["resp"] for r in kept))
        assert row["low_coverage"] == (len(kept) / 30 < 0.5)
    assert c.loc["step_0196", "low_coverage"] and not c.loc["step_0001", "low_coverage"]


def test_val_cot_without_proxy_files_and_with_garbage(tmp_path):
    c = rd.open_run(FULL_LOG).val_cot()  # dumps with no proxy_trajectory.json
    assert len(c) == 4 and (c["n"] == 0).all() and c["cot_ratio"].isna().all() and (c["coverage"] == 0).all()
    work = copy_run(VAL_DATA, tmp_path, "w")
    trials = work / "harbor_trials" / "swe_lego_rl" / EXP / "step_0001"
    proxies = sorted(trials.glob("*/proxy_trajectory.json"))
    proxies[0].write_bytes(b"\x00{not json")
    proxies[1].write_text('{"messages_snapshot": "nope"}')
    before = rd.open_run(VAL_LOG).val_cot().set_index("event")
    after = rd.open_run(work / "logs" / f"{EXP}.log").val_cot().set_index("event")
    assert after.loc["step_0001", "n"] == before.loc["step_0001", "n"] - 2
    assert after.loc["step_0066", "cot_ratio"] == pytest.approx(before.loc["step_0066", "cot_ratio"])


def test_figures_escape_data_text():
    """Plotly renders some HTML in names and tick labels: data text goes in as entities."""
    hostile = "<img src=x onerror=alert(1)>"
    v = frames.typed(pd.DataFrame({"event": ["<b>e</b>"], "step": [None], "source": [hostile], "statistic": ["mean@1"],
                                   "value": [0.5], "core": [True]}), frames.VALIDATION)
    modes = frames.typed(pd.DataFrame({"event": ["<b>e</b>"], "category": ["no_impl"], "task_id": [hostile]}),
                         frames.FAILURE_MODES)
    cot = frames.typed(pd.DataFrame({"event": ["<b>e</b>"], "n": [1], "cohort_size": [4], "coverage": [0.25],
                                     "low_coverage": [True], "cot_ratio": [0.3]}), frames.VAL_COT)
    for fig in (vc.score_figure(v, list(val.series_names(v))), vc.failure_figure(modes, vc.event_labels(v)),
                vc.cot_figure(cot)):
        text = json.dumps(fig.to_dict())
        assert "<img" not in text and "<b>" not in text and "&lt;b&gt;e&lt;/b&gt;" in text
    assert "&lt;img" in vc.score_figure(v, list(val.series_names(v))).data[0].name
    link = vc.trajectory_link("r&1", step=3, sample_id="3-a b", split="val")
    assert link == "trajectory?run=r%261&step=3&split=val&sample=3-a+b"


def test_every_demo_kind_answers_the_validation_frames(demo_runs):
    _folder, runs = demo_runs
    for path, run_id in zip(runs["path"], runs["run_id"]):
        run = rd.open_run(path, run_id=run_id)
        assert frames.check(run.validation(), frames.VALIDATION) == []
        assert frames.check(run.val_cot(), frames.VAL_COT) == []
        assert frames.check(run.failure_modes(), frames.FAILURE_MODES) == []
        assert ("failure_modes" in run.capabilities) == (run.kind == "swe-lego-rl")
    kinds = {k for k, p in zip(runs["kind"], runs["path"]) if not rd.open_run(p).validation().empty}
    assert kinds == {"prime-rl", "verl", "swe-lego-rl", "relax"}
