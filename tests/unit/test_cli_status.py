"""`rundash status RUN_DIR [--json]` and `rundash check-in RUN_DIR` on the demo runs: through a real
subprocess (`python -m rundash_core.serve.cli`) and through `cli.main`; the JSON follows its schema."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import rundash_core as rd
from rundash_core.health.checks import AREAS, HEALTH_STATES, SEVERITIES, health_state
from rundash_core.serve import cli
from rundash_core.serve.cli_status import STATUS_SCHEMA

from helpers.health import checkin_fields

FINDING_KEYS = {"severity", "area", "rule", "metric", "step_start", "step_end", "message", "evidence"}


def run_cli(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "RUNDASH_ROOTS"}
    return subprocess.run([sys.executable, "-m", "rundash_core.serve.cli", *args], capture_output=True, text=True,
                          timeout=300, env=env)


def check_schema(data: dict, run) -> None:
    assert data["schema"] == STATUS_SCHEMA
    ov = run.overview()
    card = data["run"]
    assert (card["run_id"], card["kind"], card["path"], card["step"], card["max_steps"]) == (
        run.run_id, run.kind, run.path, ov.step, ov.max_steps)
    assert card["status"] in ("running", "completed", "stopped", "unknown")
    assert data["health"] in HEALTH_STATES
    for f in data["findings"]:
        assert set(f) == FINDING_KEYS and f["severity"] in SEVERITIES and f["area"] in AREAS
    assert data["health"] == health_state([rd.Finding(**f) for f in data["findings"]])
    metrics = run.metrics()
    for sec in data["sections"]:
        assert sec["section"] and sec["metrics"]
        for m in sec["metrics"]:  # the latest value of the key, as the tidy frame has it
            rows = metrics[(metrics["metric"] == m["metric"]) & metrics["step"].notna()]
            last = rows[rows["step"] == rows["step"].max()]
            assert m["step"] == int(rows["step"].max()) and m["value"] in set(last["value"])
    assert isinstance(data["problems"], list)


@pytest.mark.parametrize("kind", ["prime-rl", "verl"])
def test_status_json_in_a_subprocess(demo_runs, kind):
    _folder, runs = demo_runs
    row = runs[runs["kind"] == kind].iloc[0]
    done = run_cli("status", row["path"], "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    run = rd.open_run(row["path"], run_id=row["run_id"])
    check_schema(data, run)
    assert data["sections"], "every demo run has metrics"
    checkin = run_cli("check-in", row["path"])
    assert checkin.returncode == 0, checkin.stderr
    assert checkin_fields(checkin.stdout)["Health"] == data["health"]


def test_status_of_every_demo_run_through_main(demo_runs, capsys):
    _folder, runs = demo_runs
    for path in runs["path"]:
        assert cli.main(["status", path, "--json"]) == 0
        data = json.loads(capsys.readouterr().out)
        check_schema(data, rd.open_run(path))  # (the CLI opens it the same way)
        assert cli.main(["status", path]) == 0  # the table for people
        text = capsys.readouterr().out
        assert data["run"]["name"] in text and f"health {data['health']}" in text
        assert f"Findings ({len(data['findings'])})" in text
        for f in data["findings"]:
            assert f["message"] in text
        assert cli.main(["check-in", path]) == 0
        assert checkin_fields(capsys.readouterr().out)["Health"] == data["health"]


def test_missing_or_outside_paths_fail_clearly(demo_runs, tmp_path, monkeypatch, capsys):
    folder, runs = demo_runs
    done = run_cli("status", str(tmp_path / "nope"))
    assert done.returncode == 2 and "no such file or directory" in done.stderr and "Traceback" not in done.stderr
    assert cli.main(["check-in", str(tmp_path)]) == 2
    assert "not a run directory" in capsys.readouterr().err
    monkeypatch.setenv("RUNDASH_ROOTS", str(tmp_path))
    assert cli.main(["status", runs["path"].iloc[0], "--json"]) == 2
    err = capsys.readouterr()
    assert "outside the allowed roots" in err.err and err.out == ""


def test_a_run_with_bad_lines_still_reports(tmp_path, capsys):
    from helpers import make_rl_run

    rows = [{"step": s, "time": 1.9e9 + s, "producer": "trainer", "optim/grad_norm": 1.0, "loss/mean": 0.1}
            for s in range(12)]
    run_dir = make_rl_run(tmp_path, "bad--run--0001", rows=[*rows[:6], "garbage{", b"\xff\xfe\x00", *rows[6:],
                                                            '{"step": 12, "time": 1900000012, "loss/mean": NaN'],
                          max_steps=40)
    assert cli.main(["status", str(run_dir), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["run"]["step"] == 12 and data["problems"]  # the bad lines are named, the run still shows
    assert any("metrics.jsonl" in p for p in data["problems"])
    assert cli.main(["check-in", str(run_dir)]) == 0
    assert checkin_fields(capsys.readouterr().out)["Step"] == "12 / 40"


def test_terminal_output_shows_no_control_characters():
    from rundash_core.serve.cli_status import printable

    assert printable("reward\x1b[31m/mean\x07 ok\nnext\tcol") == "reward?[31m/mean? ok\nnext\tcol"
