"""Failure modes of val tasks (`rundash_core.sources.swe_lego_rl.failure_modes`, `sources/harbor_val.py`; swe-lego-rl.md
section 8): the rules in order, the sample dumps against a reading with json.load, a built trial
with an OpenHands-SDK log and a gold patch, and reading only what the rules need."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import rundash_core as rd
from rundash_core import frames
from rundash_core.sources.swe_lego_rl import failure_modes as fm
from rundash_core.views import validation_charts as vc

from helpers import copy_run
from helpers.lego_validation import EXP, VAL_DATA, VAL_LOG, VAL_TRIALS, ref_cohort, ref_first_copies, trial_reward

SDK_LOG = """Action: FileEditorAction

Arguments:
  command: "view"
  path: "/testbed/pkg/util.py"
Observation: ...
Action: FileEditorAction

Arguments:
  command: "str_replace"
  path: "/testbed/{path}"
Tokens: in 12K output 3.5K
{extra}"""


def test_rules_in_order():
    report = {"resolved": False, "patch_successfully_applied": True}
    edit = [fm.Edit("str_replace", "pkg/core.py")]
    facts = dict(reward=0.0, report=report, agent_text="x", edits=edit, output_tokens=100, gold=["pkg/core.py"])
    cases = [({"reward": 1.0}, "success"), ({"report": {**report, "resolved": True}}, "success"),
             ({"report": None}, "infra"), ({"report": {**report, "patch_successfully_applied": False}}, "infra"),
             ({"agent_text": None, "edits": None}, "infra"),
             ({"agent_text": "same\n" * 40}, "dead_loop"), ({"output_tokens": 60_000}, "dead_loop"),
             ({}, "gold_edited_failed"), ({"edits": [fm.Edit("insert", "other/core.py")]}, "gold_edited_failed"),
             ({"edits": [fm.Edit("create", "other/core.py")]}, "no_impl"),
             ({"edits": [fm.Edit("append", "pkg/other.py")]}, "file_loc_fail"),
             ({"gold": None}, "edited_failed"), ({"edits": []}, "no_impl")]
    for change, want in cases:
        assert fm.classify(fm.TrialFacts(**{**facts, **change}))[0] == want, change
    assert fm.longest_repeat("a\n\n a\nb\na\na\n") == 2
    assert fm.gold_files("+++ b/x/y.py\n--- a/x/y.py\n+++ b/a.py\n+++ b/x/y.py\n") == ["a.py", "x/y.py"]
    text = SDK_LOG.format(path="pkg/core.py", extra="")
    assert fm.sdk_edits(text) == [fm.Edit("view", "pkg/util.py"), fm.Edit("str_replace", "pkg/core.py")]
    assert fm.sdk_output_tokens(text) == 3500


def test_failure_modes_of_the_sample_dumps_and_a_built_trial(tmp_path):
    run = rd.open_run(VAL_LOG)
    modes = run.failure_modes()
    assert frames.check(modes, frames.FAILURE_MODES) == []
    assert set(modes["event"]) == {"step_0196"} and modes["step"].isna().all()  # the last event by default
    firsts = ref_first_copies(VAL_TRIALS, ["step_0001", "step_0066", "step_0131", "step_0196"])
    cohort = set(ref_cohort(firsts))
    assert sorted(modes["task_id"]) == sorted(t for t in firsts["step_0196"] if t in cohort)
    first = run.failure_modes("step_0001").set_index("task_id")
    for task, trial in firsts["step_0001"].items():
        report = trial / "verifier" / "report.json"
        resolved = report.exists() and next(iter(json.loads(report.read_text()).values()))["resolved"]
        want = "success" if trial_reward(trial) > 0 or resolved else "infra" if not report.exists() else None
        if want:
            assert first.loc[task, "category"] == want
        else:  # the sample writes no openhands_sdk.txt and no gold patch: the proxy's edits decide
            assert first.loc[task, "category"] in ("edited_failed", "no_impl", "dead_loop", "infra")
    with pytest.raises(KeyError):
        run.failure_modes("step_9999")
    # a built trial: the SDK log, the gold patch inside the allowed roots
    work = copy_run(VAL_DATA, tmp_path, "w")
    task_dir = tmp_path / "tasks" / "t1"
    (task_dir / "solution").mkdir(parents=True)
    (task_dir / "solution" / "solve.sh").write_text("cat <<'EOF' | git apply\n--- a/pkg/core.py\n+++ b/pkg/core.py\nEOF\n")
    dump = work / "harbor_trials" / "swe_lego_rl" / EXP / "step_0001"
    failed = next(t for t in sorted(dump.iterdir()) if (t / "verifier" / "report.json").exists() and trial_reward(t) == 0)
    result = json.loads((failed / "result.json").read_text())
    result["task_id"] = {"path": str(task_dir)}
    (failed / "result.json").write_text(json.dumps(result))
    sdk = failed / "agent" / "openhands_sdk.txt"
    sdk.parent.mkdir(exist_ok=True)
    log = work / "logs" / f"{EXP}.log"
    task = re.sub(r"-[0-9a-f]{6,}$", "", failed.name)
    for path, extra, want in (("pkg/core.py", "", "gold_edited_failed"), ("pkg/other.py", "", "file_loc_fail"),
                              ("pkg/core.py", "loop\n" * 40, "dead_loop")):
        sdk.write_text(SDK_LOG.format(path=path, extra=extra))
        assert rd.open_run(log).failure_modes("step_0001").set_index("task_id").loc[task, "category"] == want
    (failed / "verifier" / "report.json").write_text("{garbage")
    broken = rd.open_run(log).failure_modes("step_0001").set_index("task_id").loc[task]
    assert broken["category"] == "infra" and broken["reason"] == "verifier/report.json is not valid JSON"




def test_failure_events_on_request():
    names = [f"e{i}" for i in range(8)]
    assert vc.failure_events(names, "e5", every=False) == ["e4", "e5"]
    assert vc.failure_events(names, "e0", every=False) == ["e0"]
    assert vc.failure_events(names, "e5", every=True) == names
    assert vc.failure_events(names[:3], "e1", every=False) == names[:3]


def test_failure_modes_read_the_agent_record_only_where_rules_1_to_3_do_not_decide(monkeypatch):
    from rundash_core.sources.swe_lego_rl import harbor

    opened = []
    real = harbor.load_json_object
    monkeypatch.setattr(harbor, "load_json_object", lambda path, fid, name="result.json":
                        (opened.append((path, name)), real(path, fid, name))[1])
    modes = rd.open_run(VAL_LOG).failure_modes("step_0066")
    proxies = {str(Path(p).parent) for p, name in opened if name == "proxy_trajectory.json"}
    undecided = set(modes.loc[~modes["category"].isin(["success", "infra"]), "sample_id"])
    assert proxies and {p.rsplit("/", 1)[-1] for p in proxies} == {s.split("-", 1)[1] for s in undecided}
    opened.clear()
    again = rd.open_run(VAL_LOG).failure_modes("step_0066")  # kept: nothing is read again
    assert again.equals(modes) and not [n for _p, n in opened if n != "result.json"]
