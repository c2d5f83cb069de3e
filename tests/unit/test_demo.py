"""The synthetic demo runs (`rundash_core.demo`): written fast, once, in the layouts the core reads
(four prime-rl runs, a verl log, a SWE-Lego-RL log with its Harbor trials, a Relax dump), and the
live run kept growing by the live writer. Every test writes into tmp_path, never home.

The checks of the verl, Lego and Relax runs read the files with small reference readers written
from the format notes (verl.md 3-6, swe-lego-rl.md 2.3 and 4, relax.md 2), then compare rundash's
readers against them."""
from __future__ import annotations

import json
import os
import re
import time
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

import rundash_core as rd
from rundash_core import demo
from rundash_core.demo.folder import MARKER
from rundash_core.demo.runs import (
    LEGO_NAME,
    OTHER_RUNS,
    RELAX_NAME,
    RESUME_CRASH_STEP,
    RESUME_FROM,
    RUN_NAMES,
    SFT_STEPS,
    VERL_CRASH_AFTER,
    VERL_LAST,
    VERL_NAME,
    VERL_RESUME_FROM,
    VERL_TEST_FREQ,
    VERL_TOTAL,
)
from rundash_core.sources.prime_rl import layout as prime_rl
from rundash_core.sources.relax import demo_run as relax_run
from rundash_core.sources.swe_lego_rl import demo_run as lego_run
from rundash_core.sources.verl import demo_dumps as verl_dumps

ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
LOGURU = re.compile(r"^(?P<time>\d{2}:\d{2}:\d{2}) +(?P<level>TRACE|DEBUG|INFO|SUCCESS|WARNING|ERROR|CRITICAL) (?P<msg>.*)$")
NAMES = RUN_NAMES


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """One demo folder shared by the read-only tests."""
    return demo.ensure_demo(tmp_path_factory.mktemp("cache") / "demo")


@pytest.fixture(scope="module")
def folder(written):
    return written


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def _all_mtimes(root: Path) -> dict[str, int]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            out[os.path.relpath(p, root)] = os.lstat(p).st_mtime_ns
    return out


# Writing ---------------------------------------------------------------------------------------

def test_writes_small_and_returns_the_output_dir(written):
    folder = written
    runs = sorted(p.name for p in folder.iterdir() if p.is_dir())
    assert runs == sorted([*NAMES.values(), "harbor_trials", RELAX_NAME, verl_dumps.FOLDER])  # + the verl val dumps
    files = sorted(p.name for p in folder.iterdir() if p.is_file())
    assert files == sorted([MARKER, f"{VERL_NAME}.log", f"{LEGO_NAME}.log", f"{LEGO_NAME}_vllm.log"])
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(folder) for f in fs)
    assert size < 10 << 20, f"demo is {size / 1e6:.1f} MB"
    marker = json.loads((folder / MARKER).read_text())
    assert marker["version"] == demo.DEMO_VERSION
    # written through a temp sibling that was renamed: nothing left next to it
    assert [p.name for p in folder.parent.iterdir()] == [folder.name]


def test_second_call_is_idempotent_and_cheap(tmp_path):
    root = tmp_path / "demo"
    assert demo.ensure_demo(root) == root
    before = _all_mtimes(root)
    inode = os.stat(root / NAMES["live"] / "monitors/file/metrics.jsonl").st_ino
    assert demo.ensure_demo(root) == root
    assert _all_mtimes(root) == before  # nothing rewritten: the second call only checks
    assert os.stat(root / NAMES["live"] / "monitors/file/metrics.jsonl").st_ino == inode


def test_stale_version_is_rewritten(tmp_path):
    root = tmp_path / "demo"
    demo.ensure_demo(root)
    marker = root / MARKER
    marker.write_text(json.dumps({"version": demo.DEMO_VERSION - 1, "written": time.time()}))
    (root / "leftover-from-old-version").mkdir()
    demo.ensure_demo(root)
    assert json.loads(marker.read_text())["version"] == demo.DEMO_VERSION
    assert not (root / "leftover-from-old-version").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo"]  # the old copy was removed


def test_refuses_to_replace_a_folder_that_is_not_a_demo(tmp_path):
    root = tmp_path / "mine"
    root.mkdir()
    (root / "precious.txt").write_text("keep me")
    with pytest.raises(RuntimeError, match="not a rundash demo"):
        demo.ensure_demo(root)
    assert (root / "precious.txt").read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"]


def test_content_is_deterministic_for_a_given_now(tmp_path):
    now = 1_790_000_000.0
    a = demo.ensure_demo(tmp_path / "a", now=now)
    b = demo.ensure_demo(tmp_path / "b", now=now)
    files_a = sorted(str(p.relative_to(a)) for p in a.rglob("*") if p.is_file() and p.name != MARKER)
    files_b = sorted(str(p.relative_to(b)) for p in b.rglob("*") if p.is_file() and p.name != MARKER)
    assert files_a == files_b and len(files_a) > 40
    for rel in files_a:
        # the Lego log names its trial folders by absolute path: the only place the folder shows
        assert (a / rel).read_bytes().replace(str(a).encode(), str(b).encode()) == (b / rel).read_bytes(), rel
        assert os.stat(a / rel).st_mtime == os.stat(b / rel).st_mtime, rel
    live_rows = _rows(a / NAMES["live"] / "monitors/file/metrics.jsonl")
    assert max(r["time"] for r in live_rows) == pytest.approx(now, abs=1.0)


def test_demo_root_honours_the_cache_env_var(tmp_path, monkeypatch):
    monkeypatch.setenv("RUNDASH_CACHE_DIR", str(tmp_path / "cache"))
    assert demo.demo_root() == tmp_path / "cache" / "demo"
    assert not (tmp_path / "cache").exists()  # asking where it goes creates nothing


def test_demo_root_falls_back_when_the_cache_dir_is_unwritable(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")  # nothing can be created below a regular file, even by root
    monkeypatch.setenv("RUNDASH_CACHE_DIR", str(blocker / "cache"))
    root = demo.demo_root()
    assert not str(root).startswith(str(blocker)) and root.name == "demo"
    assert blocker.read_text() == "not a directory"


# What the core reads back -----------------------------------------------------------------------

def test_discover_lists_the_four_prime_rl_runs_with_their_status(folder):
    every = rd.discover([folder]).set_index("name")
    runs = every[every["kind"] == "prime-rl"]
    assert sorted(runs.index) == sorted(NAMES.values())
    assert runs["error"].isna().all()

    live = runs.loc[NAMES["live"]]
    assert (live.status, live.model, live.max_steps, live.attempts, live.flavor) == \
        ("running", "Qwen/Qwen3-4B", 2000, 1, "rl")
    assert 140 <= live.step <= 160
    assert live.train_envs == ["math-python", "wiki-search"] and live.eval_envs == ["gsm8k"]

    done = runs.loc[NAMES["completed"]]
    assert (done.status, done.model, done.step, done.max_steps, done.attempts) == \
        ("completed", "Qwen/Qwen3-0.6B", 300, 300, 1)
    assert pd.Timestamp.now(tz="UTC") - done.updated > pd.Timedelta(hours=20)

    resumed = runs.loc[NAMES["resumed"]]
    assert (resumed.status, resumed.model, resumed.max_steps, resumed.attempts) == \
        ("stopped", "Qwen/Qwen3-1.7B", 200, 2)
    assert resumed.step < resumed.max_steps
    assert pd.Timedelta(hours=2) < pd.Timestamp.now(tz="UTC") - resumed.updated < pd.Timedelta(hours=4)

    sft = runs.loc[NAMES["sft"]]
    assert (sft.flavor, sft.status, sft.model) == ("sft", "completed", "Qwen/Qwen3-0.6B")
    assert sft.step == sft.max_steps == SFT_STEPS
    assert sft.train_envs == ["willcb/R1-reverse-wikipedia-paragraphs-v1-1000"]

    assert list(every.index)[0] == NAMES["live"]  # newest first


def test_live_metrics_have_both_producers_and_time_keyed_inference_rows(folder):
    run = rd.open_run(folder / NAMES["live"])
    m = run.metrics()
    assert set(m["producer"].unique()) == {"trainer", "orch"}
    timed = m[m["step"].isna()]
    assert len(timed)
    timed_keys = set(timed["metric"].astype(str))
    for key in ("kv_cache_usage_perc/mean", "kv_cache_usage_perc/min", "kv_cache_usage_perc/max",
                "num_preemptions_total:rate/sum", "num_requests_running/mean", "num_requests_waiting/max",
                "prefix_cache_hit_rate/pooled", "prefix_cache_hit_rate/min", "generation_tokens_total:rate/sum",
                "prompt_tokens_total:rate/sum"):
        assert f"inference/agg/{key}" in timed_keys, key
    for key in ("dispatcher/inflight/train", "dispatcher/inflight/eval", "concurrency/max_inflight"):
        assert key in timed_keys
    assert set(timed["producer"].unique()) == {"orch"}
    # ~every 5 s of simulated time
    inf_times = timed[timed["metric"] == "inference/agg/kv_cache_usage_perc/mean"]["time"].sort_values()
    assert inf_times.diff().dropna().median() == pytest.approx(5.0, abs=0.5)

    step_time = m[(m["metric"] == "time/step") & m["step"].notna()]
    assert set(step_time["producer"].unique()) == {"trainer", "orch"}
    assert not step_time.duplicated(["step", "producer"]).any()
    wide = run.metrics_wide()
    assert {"trainer:time/step", "orch:time/step"} <= set(wide.columns)
    assert "train/agg/effective/agent/reward/mean" in wide.columns
    assert "train/math-python/all/agent/reward/mean" in wide.columns
    assert any(c.startswith("eval/gsm8k/all/agent/avg@") for c in wide.columns)
    assert any(c.startswith("eval/gsm8k/effective/agent/pass@") for c in wide.columns)


def test_curves_look_like_training(folder):
    wide = rd.open_run(folder / NAMES["completed"]).metrics_wide().set_index("step")
    reward = wide["train/reverse-text/all/agent/reward/mean"].dropna()
    assert reward.iloc[-50:].mean() > reward.iloc[:20].mean() + 0.3
    assert reward.diff().abs().dropna().mean() > 0.005  # noisy, not a straight line
    entropy = wide["entropy/all/mean"].dropna()
    assert entropy.iloc[-30:].mean() < entropy.iloc[:10].mean()
    lr = wide["optim/lr"].dropna()
    assert lr.iloc[0] < lr.max() and lr.iloc[-1] < lr.max()  # warmup, then decay
    gn = wide["optim/grad_norm"].dropna()
    assert gn.max() > 3 * gn.median()  # occasional spikes
    tokens = wide["progress/total_tokens"].dropna()
    assert tokens.is_monotonic_increasing


def test_metric_rows_follow_the_writer_rules(folder):
    for name in NAMES.values():
        rows_path = folder / name / "monitors/file/metrics.jsonl"
        text = rows_path.read_text()
        assert text.endswith("\n")
        times = []
        for line in text.splitlines():
            keys = list(json.loads(line))
            assert keys[:2] == ["step", "time"] and keys[-1] == "producer", (name, keys[:3])
            times.append(json.loads(line)["time"])
        assert times == sorted(times), name
    trainer_rows = [r for r in _rows(folder / NAMES["live"] / "monitors/file/metrics.jsonl")
                    if r["producer"] == "trainer" and r["step"] == 100]
    assert len(trainer_rows) == 5
    assert [next(k for k in r if k not in ("step", "time")).split("/")[0] for r in trainer_rows] == \
        ["perf", "optim", "loss", "time", "system"]


def test_resumed_run_repeats_steps_and_the_reader_merges_them(folder):
    path = folder / NAMES["resumed"]
    raw = Counter(r["step"] for r in _rows(path / "monitors/file/metrics.jsonl")
                  if r["producer"] == "trainer" and "time/step" in r)
    assert all(raw[s] == 2 for s in range(RESUME_FROM + 1, RESUME_CRASH_STEP + 1))
    assert raw[RESUME_FROM] == 1 and raw[RESUME_CRASH_STEP + 1] == 1

    m = rd.open_run(path).metrics()
    stepped = m[m["step"].notna()]
    assert not stepped.duplicated(["step", "producer", "metric"]).any()
    # last write wins: step 70's value is attempt 2's
    last = [r for r in _rows(path / "monitors/file/metrics.jsonl")
            if r["step"] == 70 and r["producer"] == "trainer" and "optim/grad_norm" in r][-1]
    got = stepped[(stepped["step"] == 70) & (stepped["metric"] == "optim/grad_norm")]["value"]
    assert got.tolist() == [last["optim/grad_norm"]]


def test_resumed_run_attempts_configs_and_logs(folder):
    run = folder / NAMES["resumed"]
    assert os.readlink(run / "configs/latest") == "attempt_2"
    assert os.readlink(run / "logs/latest") == "attempt_2"
    assert "--resume" not in (run / "configs/attempt_1/command.txt").read_text()
    cmd2 = (run / "configs/attempt_2/command.txt").read_text()
    assert cmd2.startswith("uv run rl ") and "--resume" in cmd2 and cmd2.endswith("\n")
    orch = json.loads((run / "configs/attempt_2/resolved/orchestrator.json").read_text())
    assert orch["max_steps"] == 200 and orch["model"]["name"] == "Qwen/Qwen3-1.7B"
    assert [s["name"] for s in orch["train"]["source"]] == ["acereason-math"]
    assert [s["name"] for s in orch["eval"]["source"]] == ["math500"]
    lines = (run / "logs/attempt_1/trainer.log").read_text().splitlines()
    err_at = [i for i, line in enumerate(lines) if "\x1b[31m\x1b[1m  ERROR" in line]
    assert err_at and LOGURU.match(ANSI.sub("", lines[err_at[-1]])).group("level") == "ERROR"
    tail = lines[err_at[-1] + 1:]  # the traceback: continuation lines that belong to the ERROR record
    assert tail and all(LOGURU.match(ANSI.sub("", line)) is None for line in tail)
    assert "Traceback (most recent call last):" in tail[0] and "torch.OutOfMemoryError: CUDA out of memory" in tail[-1]
    assert "CUDA out of memory" not in (run / "logs/attempt_2/trainer.log").read_text()
    assert rd.open_run(run).attempts() == [1, 2]


def test_layout_configs_and_logs_match_the_spec(folder):
    for name in NAMES.values():
        run = folder / name
        for kind in ("configs", "logs"):
            link = run / kind / "latest"
            assert link.is_symlink() and not os.path.isabs(os.readlink(link)), link
            assert re.fullmatch(r"attempt_\d+", os.readlink(link))
            assert link.resolve().is_dir()
        latest = run / "configs/latest"
        assert (latest / "command.txt").read_text().startswith("uv run ")
        assert (run / "trainer_step").read_text().strip().isdigit()
        for log in (run / "logs/latest").glob("*.log"):
            if log.name == "inference.log":
                continue
            lines = log.read_text().splitlines()
            assert lines and all("\x1b[" in line for line in lines if LOGURU.match(ANSI.sub("", line)))
            parsed = [LOGURU.match(ANSI.sub("", line)) for line in lines]
            assert sum(p is not None for p in parsed) >= 0.9 * len(lines), log
    live = folder / NAMES["live"]
    assert (live / "configs/latest/rl.toml").is_file()
    for comp in ("trainer", "orchestrator", "inference"):
        assert (live / f"configs/latest/resolved/{comp}.json").is_file()
    for rel in ("envs/train/math-python.log", "envs/train/wiki-search.log", "envs/eval/gsm8k.log",
                "inference.log", "trainer.log", "orchestrator.log"):
        assert (live / "logs/latest" / rel).stat().st_size > 0, rel
    plan = json.loads((live / "monitors/file/plan.json").read_text())
    assert "0" in plan["gsm8k"] and "25" in plan["gsm8k"]
    sft = folder / NAMES["sft"]
    assert (sft / "configs/latest/sft.toml").is_file()
    cfg = json.loads((sft / "configs/latest/resolved/sft.json").read_text())
    assert cfg["max_steps"] == SFT_STEPS and cfg["model"]["name"] == "Qwen/Qwen3-0.6B" and cfg["data"]["name"]
    sft_keys = set(rd.open_run(sft).metrics()["metric"].astype(str))
    assert {"loss/mean", "loss/perplexity", "val/loss", "val/perplexity", "progress/epoch", "optim/lr",
            "optim/grad_norm", "perf/mfu", "perf/throughput", "perf/peak_memory", "time/step",
            "time/forward_backward", "time/save_ckpt"} <= sft_keys
    assert not any(k.startswith("inference/") for k in sft_keys)


def test_old_runs_have_old_mtimes(folder):
    now = time.time()
    for key, age in (("completed", 86400), ("sft", 2 * 86400), ("resumed", 3 * 3600)):
        run = folder / NAMES[key]
        newest = max(os.lstat(os.path.join(d, f)).st_mtime for d, _, fs in os.walk(run) for f in fs)
        assert now - newest == pytest.approx(age, abs=600), key


# The verl, SWE-Lego-RL and Relax runs --------------------------------------------------------------

VERL_SEGMENT = re.compile(r"^(?P<key>.+):(?P<value>[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf)"
                          r"|True|False|np\.[a-z]+\d*\([^()]*\))$")
RAY_PREFIX = re.compile(r"^\((?:[A-Za-z_][\w:.-]*(?: [A-Za-z_][\w.-]*)? )?pid=\d+(?:, ip=[0-9.]+)?\) ?")


def ref_verl_lines(log: Path) -> list[tuple[int, dict[str, str]]]:
    """verl.md 4 and 3: (step, {key: raw value}) per metric line in file order: `\r` pieces, ANSI
    codes and Ray prefixes stripped, `step:N - …` searched, every segment split at its last colon."""
    out = []
    for raw in log.read_text(encoding="utf-8", errors="replace").split("\n"):
        for piece in raw.split("\r"):
            body = ANSI.sub("", piece).rstrip()
            while (m := RAY_PREFIX.match(body)) is not None:
                body = body[m.end():]
            m = re.search(r"(?:^|[^\w/])step:(\d+) - (.+)$", body)
            if m is None:
                continue
            segs = [VERL_SEGMENT.match(part) for part in m.group(2).split(" - ")]
            if all(segs):
                out.append((int(m.group(1)), {g.group("key"): g.group("value") for g in segs}))
    return out


def ref_value(raw: str) -> float:
    m = re.fullmatch(r"np\.[a-z]+\d*\((.*)\)", raw)
    return float(m.group(1) if m else raw)


def _by_kind(folder: Path) -> pd.DataFrame:
    return rd.discover([folder]).set_index("name")


def test_discover_lists_every_kind_with_the_expected_runs_and_status(folder):
    runs = _by_kind(folder)
    assert set(runs["kind"]) == {"prime-rl", "verl", "swe-lego-rl", "relax"}
    assert runs["error"].isna().all()
    others = runs[runs["kind"] != "prime-rl"]
    assert sorted(others.index) == sorted([VERL_NAME, LEGO_NAME, RELAX_NAME])
    assert dict(zip(others.index, others["kind"])) == {VERL_NAME: "verl", LEGO_NAME: "swe-lego-rl",
                                                       RELAX_NAME: "relax"}
    assert Path(runs.loc[VERL_NAME, "path"]) == folder / OTHER_RUNS["verl"]
    assert Path(runs.loc[LEGO_NAME, "path"]) == folder / OTHER_RUNS["swe-lego-rl"]
    assert Path(runs.loc[RELAX_NAME, "path"]) == folder / OTHER_RUNS["relax"]

    verl = runs.loc[VERL_NAME]
    assert (verl.status, verl.step, verl.max_steps) == ("stopped", VERL_LAST, VERL_TOTAL)
    assert verl.model == "Qwen/Qwen2.5-3B-Instruct"
    lego = runs.loc[LEGO_NAME]
    assert (lego.status, lego.step, lego.max_steps) == ("completed", lego_run.TOTAL, lego_run.TOTAL)
    relax = runs.loc[RELAX_NAME]
    assert (relax.status, relax.step) == ("stopped", relax_run.STEPS - 1)  # finished; Relax logs no max
    now = pd.Timestamp.now(tz="UTC")
    assert (now - runs.loc[VERL_NAME, "updated"]).total_seconds() == pytest.approx(5 * 3600, abs=600)  # a stamp
    assert pd.isna(runs.loc[RELAX_NAME, "updated"]) and pd.isna(runs.loc[RELAX_NAME, "created"])  # Relax logs no times
    assert runs.loc[VERL_NAME, "resumed_from"] == [VERL_RESUME_FROM] and runs.loc[VERL_NAME, "attempts"] == 2
    # the Lego log prints no wall-clock time at its end (as the sample): start + its step timings
    assert (runs.loc[LEGO_NAME, "updated"] - runs.loc[LEGO_NAME, "created"]).total_seconds() == pytest.approx(
        runs.loc[LEGO_NAME, "duration_s"], abs=1)


def test_nothing_next_to_the_prime_rl_runs_looks_like_one(folder):
    """prime-rl claims any directory holding configs/, logs/, monitors/ or traces.jsonl: the demo
    folder itself, the Harbor tree and the Relax save dir must hold none of them."""
    for d in (folder, folder / "harbor_trials", folder / RELAX_NAME):
        assert not prime_rl.is_run_dir(str(d)), d
    for dirpath, dirnames, filenames in os.walk(folder / "harbor_trials"):
        assert not set(prime_rl.MARKERS) & set(dirnames + filenames), dirpath
    assert {p.name for p in (folder / RELAX_NAME).iterdir()} == {"rollout_result", "latest_checkpointed_iteration.txt"}


def test_verl_log_is_f3_era_with_a_resume_and_the_reader_merges_it(folder):
    log = folder / OTHER_RUNS["verl"]
    lines = ref_verl_lines(log)
    steps = [s for s, _ in lines]
    # launch 1: 0 (initial validation), 1..crash; launch 2 restarts after the checkpoint
    restart = next(i for i in range(1, len(steps)) if steps[i] < steps[i - 1])
    assert steps[:restart] == list(range(0, VERL_CRASH_AFTER + 1))
    assert steps[restart:] == list(range(VERL_RESUME_FROM + 1, VERL_LAST + 1))
    assert Counter(steps)[VERL_RESUME_FROM + 1] == Counter(steps)[VERL_CRASH_AFTER] == 2
    assert Counter(steps)[VERL_RESUME_FROM] == Counter(steps)[VERL_CRASH_AFTER + 1] == 1
    assert set(lines[0][1]) == {"val-aux/openai/gsm8k/reward/mean@1", "val-core/openai/gsm8k/acc/mean@1",
                                "val-aux/HuggingFaceH4/MATH-500/reward/mean@1", "val-core/HuggingFaceH4/MATH-500/acc/mean@1"}
    val_steps = sorted({s for s, kv in lines if any(k.startswith("val-core/") for k in kv)})
    assert val_steps == [s for s in range(0, VERL_LAST + 1, VERL_TEST_FREQ)]
    for s, kv in lines:
        assert all(v.startswith("np.float64(") for k, v in kv.items() if k.startswith("val-"))
        if s:
            assert kv["actor/lr"].startswith("np.float64(") and kv["actor/pg_loss"].startswith("np.float64(")
            assert not kv["critic/score/mean"].startswith("np.") and not kv["timing_s/step"].startswith("np.")
            assert ("timing_s/testing" in kv) == (s % VERL_TEST_FREQ == 0)
    text = log.read_text(encoding="utf-8")
    assert "\x1b[36m(TaskRunner pid=" in text and "Initial validation metrics" in text and "Training Progress:" in text
    assert text.count("{'actor_rollout_ref'") == 2 and "'val_before_train': False" in text

    run = rd.open_run(log)
    assert run.kind == "verl" and run.attempts() == [1, 2]
    m = run.metrics()
    assert len(m) and int(m["step"].min()) == 0 and int(m["step"].max()) == VERL_LAST
    assert sorted(m["step"].dropna().astype(int).unique()) == list(range(0, VERL_LAST + 1))
    assert not m.duplicated(["step", "metric"]).any()  # the resumed steps merged once
    expect = {}
    for s, kv in lines:
        for k, v in kv.items():
            expect[(s, k)] = ref_value(v)  # last line wins: launch 2's values for the repeated steps
    got = {(int(s), str(k)): v for s, k, v in zip(m["step"], m["metric"], m["value"])}
    assert got == pytest.approx(expect)
    repeated = VERL_RESUME_FROM + 5
    first = next(kv for s, kv in lines if s == repeated)
    assert got[(repeated, "actor/grad_norm")] != ref_value(first["actor/grad_norm"])
    assert run.config()["trainer"]["val_before_train"] is False  # the latest launch's config


def ref_lego_pairing(log: Path) -> dict[int, int]:
    """swe-lego-rl.md 2.3: folder number -> trainer step, pairing the lines in file order."""
    pairs, pending = {}, None
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        m = re.search(r"test_gen_batch meta info:.*'validate':\s*True.*'global_steps':\s*(\d+)", line)
        if m:
            pending = int(m.group(1))
            continue
        m = re.search(r"step:(\d+)\s*-.*rollouter/validate_time", line)
        if m and pending is not None:
            pairs.setdefault(pending, int(m.group(1)))
            pending = None
    return pairs


def ref_lego_trials(exp: Path) -> list[dict]:
    out = []
    for trial in sorted(t for s in exp.glob("step_*") for t in s.iterdir()):
        result = json.loads((trial / "result.json").read_text())
        reward_txt = trial / "verifier" / "reward.txt"
        out.append({"folder": int(trial.parent.name[len("step_"):]), "task": re.sub(r"-[0-9a-f]{6,}$", "", trial.name),
                    "reward": float(reward_txt.read_text()) if reward_txt.exists() else None,
                    "exception": (trial / "exception.txt").exists(), "result": result, "path": trial})
    return out


def test_lego_run_trials_validation_dumps_and_pairing(folder):
    log = folder / OTHER_RUNS["swe-lego-rl"]
    exp = folder / "harbor_trials" / lego_run.PROJECT / LEGO_NAME
    pairs = ref_lego_pairing(log)
    val_folders = [lego_run.val_folder(e) for e in range(3)]
    assert pairs == dict(zip(val_folders, lego_run.VAL_AFTER)) and len(pairs) == 3
    trials = ref_lego_trials(exp)
    per_folder = Counter(t["folder"] for t in trials)
    cohort = len(lego_run.VAL_TASKS)
    assert all(per_folder[f] == cohort for f in val_folders)
    train = [t for t in trials if t["folder"] not in val_folders]
    assert train and all(per_folder[t["folder"]] == lego_run.N for t in train)
    assert all(len({t["task"] for t in train if t["folder"] == f}) == 1 for f in {t["folder"] for t in train})
    for t in trials:
        assert t["result"]["trial_name"] == t["path"].name
        if t["exception"]:
            assert t["reward"] is None and t["result"]["exception_info"]["exception_type"] == "EnvironmentStartTimeoutError"
            assert not (t["path"] / "agent").exists()
        else:
            assert t["reward"] in (0.0, 1.0) and t["result"]["verifier_result"]["rewards"]["reward"] == t["reward"]
            steps = json.loads((t["path"] / "agent" / "trajectory.json").read_text())["steps"]
            assert [s["source"] for s in steps[:2]] == ["system", "user"] and steps[-1]["source"] == "agent"
    assert 3 <= sum(t["exception"] for t in trials) <= 6
    assert {t["reward"] for t in train} >= {0.0, 1.0}
    # the logged val score is the dump's pass@1 (a trial that never started counts as unsolved)
    lines = ref_verl_lines(log)
    for f, step in pairs.items():
        dump = [t for t in trials if t["folder"] == f]
        logged = [kv for s, kv in lines if s == step and "val-core/unknown/reward/mean@1" in kv]
        assert len(logged) == 1
        assert ref_value(logged[0]["val-core/unknown/reward/mean@1"]) == pytest.approx(
            sum(1 for t in dump if t["reward"]) / cohort)
    assert f"trials_dir={exp}/step_" in log.read_text(encoding="utf-8")

    run = rd.open_run(log)
    assert run.kind == "swe-lego-rl"
    m = run.metrics()
    assert len(m) and sorted(m["step"].dropna().astype(int).unique()) == list(range(0, lego_run.TOTAL + 1))
    samples = run.samples()
    assert len(samples) == len(trials)
    assert Counter(samples["split"]) == {"val": 3 * cohort, "train": len(train)}
    assert sorted(map(os.path.realpath, samples["locator"])) == sorted(os.path.realpath(t["path"]) for t in trials)
    assert (samples["ok"] == False).sum() == sum(t["exception"] for t in trials)  # noqa: E712
    folders = run.folders()
    val = folders[folders["split"] == "val"]
    assert dict(zip(val["step"].astype(int), val["trainer_step"].astype(int))) == pairs
    v = run.validation()
    scores = v[(v["source"] == "trials") & (v["statistic"] == "val_score")]
    assert sorted(scores["event"].unique()) == [f"step_{f:04d}" for f in val_folders]
    assert list(scores["step"].astype(int)) == list(lego_run.VAL_AFTER)  # the trainer step of each event
    assert list(scores["value"]) == pytest.approx([len(s) / cohort for s in lego_run.VAL_SOLVED])


def test_relax_dump_has_the_newest_rows_and_the_reader_reads_every_step(folder):
    result = folder / RELAX_NAME / "rollout_result"
    train = sorted(int(p.stem) for p in (result / "train").glob("*.jsonl"))
    evals = sorted(int(p.stem) for p in (result / "eval").glob("*.jsonl"))
    assert train == list(range(relax_run.STEPS)) and evals == list(relax_run.EVAL_IDS)
    statuses = Counter()
    groups = set()
    for rid in train:
        rows = _rows(result / "train" / f"{rid}.jsonl")
        assert len(rows) == relax_run.GROUPS * relax_run.K
        assert [r["sample_index"] for r in rows] == list(range(len(rows))) and {r["rollout_id"] for r in rows} == {rid}
        assert Counter(r["group_index"] for r in rows) == {rid * relax_run.GROUPS + g: relax_run.K
                                                           for g in range(relax_run.GROUPS)}
        groups |= {r["group_index"] for r in rows}
        for r in rows:
            statuses[r["status"]] += 1
            assert len(r["response_token_ids"]) == len(r["response_rollout_log_probs"]) == r["response_length"]
            assert r["total_length"] == r["prompt_length"] + r["response_length"] == r["total_token_count"]
            assert "<tools>" in r["prompt"] and r["prompt"].endswith("<|im_start|>assistant\n")
            if r["status"] in ("pending", "aborted"):
                assert r["reward"] is None
            else:
                assert r["reward"] in (0.0, 1.0)
            if r["status"] == "pending":
                assert r["response"] == "" and r["response_length"] == 0
    assert {"completed", "truncated", "aborted", "pending", "failed"} <= set(statuses)
    assert statuses["completed"] > 0.75 * sum(statuses.values())
    for rid in evals:
        rows = _rows(result / "eval" / f"{rid}.jsonl")
        by_ds = {}
        for r in rows:
            by_ds.setdefault(r["dataset"], []).append(r)
        assert sorted(by_ds) == ["aime24", "gpqa_diamond"]
        for _ds, mine in by_ds.items():
            assert [r["sample_index"] for r in mine] == list(range(len(mine)))  # restarts per dataset
        assert all(isinstance(r["reward"], dict) and set(r["reward"]) == {"score", "acc", "pred"}
                   for r in by_ds["gpqa_diamond"])

    run = rd.open_run(folder / RELAX_NAME)
    assert run.kind == "relax"
    m = run.metrics()
    assert len(m)
    rollout = m[m["producer"] == "rollout"]
    assert sorted(rollout["step"].astype(int).unique()) == list(range(relax_run.STEPS))
    assert sorted(m[m["producer"] == "eval"]["step"].astype(int).unique()) == list(relax_run.EVAL_IDS)
    samples = run.samples()
    assert len(samples) == relax_run.STEPS * relax_run.GROUPS * relax_run.K + len(evals) * 14
    assert Counter(samples[samples["split"] == "train"]["status"]) == statuses
    assert samples[samples["status"].isin(["pending", "aborted"])]["reward"].isna().all()


def test_new_runs_have_old_mtimes(folder):
    now = time.time()

    def newest(path: Path) -> float:
        if path.is_file():
            return path.stat().st_mtime
        return max(os.lstat(os.path.join(d, f)).st_mtime for d, _, fs in os.walk(path) for f in fs)

    assert now - newest(folder / OTHER_RUNS["verl"]) == pytest.approx(5 * 3600, abs=600)
    lego_log = folder / OTHER_RUNS["swe-lego-rl"]
    assert now - newest(lego_log) == pytest.approx(30 * 3600, abs=600)
    trials = newest(folder / "harbor_trials")
    assert trials <= lego_log.stat().st_mtime and lego_log.stat().st_mtime - trials < 3600
    assert now - newest(folder / RELAX_NAME) == pytest.approx(9 * 3600, abs=600)
    files = sorted((folder / RELAX_NAME / "rollout_result" / "train").glob("*.jsonl"), key=lambda p: int(p.stem))
    times = [p.stat().st_mtime for p in files]
    assert times == sorted(times) and len(set(times)) == len(times)  # written once each, at the end of its step


def test_a_moved_demo_is_rewritten_so_the_lego_log_names_its_own_trials(tmp_path):
    a = demo.ensure_demo(tmp_path / "a")
    os.rename(a, tmp_path / "b")
    b = demo.ensure_demo(tmp_path / "b")
    text = (b / OTHER_RUNS["swe-lego-rl"]).read_text(encoding="utf-8")
    assert str(b / "harbor_trials") in text and str(a) + "/" not in text
    run = rd.open_run(b / OTHER_RUNS["swe-lego-rl"])
    assert run.kind == "swe-lego-rl" and len(run.samples())


# Traces ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("key", ["live", "resumed"])
def test_trace_index_offsets_point_at_their_records(folder, key):
    traces = folder / NAMES[key] / "monitors/file/traces"
    chunk = traces / "stream/00000.jsonl"
    index = _rows(traces / "stream.index.jsonl")
    assert 20 <= len(index) <= 100
    assert [r["line"] for r in index] == list(range(1, len(index) + 1))
    with open(chunk, "rb") as fh:
        for row in index:
            assert row["chunk"] == 0
            fh.seek(row["offset"])
            rec = json.loads(fh.readline())
            assert rec["id"] == row["id"]
            assert [t["id"] for t in rec["traces"]] == row["trace_ids"]
            assert row["env"] == rec["env"]["name"]
    assert {r["kind"] for r in index} == {"train", "eval"}
    assert any(not r["ok"] for r in index)  # a failed episode with no trace
    records = [json.loads(line) for line in chunk.read_bytes().splitlines()]
    good = next(r for r in records if r["traces"])
    node = good["traces"][0]["nodes"][-1]
    assert len(node["token_ids"]) == len(node["mask"]) and len(node["logprobs"]) == sum(node["mask"])
    assert "parent" not in good["traces"][0]["nodes"][0]
    assert set(good["traces"][0]["info"]) >= {"kind", "dispatch", "arrival"}
    ann_index = _rows(traces / "annotations/orch.index.jsonl")
    with open(traces / "annotations/orch/00000.jsonl", "rb") as fh:
        for row in ann_index:
            fh.seek(row["offset"])
            assert json.loads(fh.readline())["trace_id"] == row["trace_id"]


# Live writer ------------------------------------------------------------------------------------

def _max_step(run: Path) -> int:
    return int(rd.open_run(run).metrics()["step"].max())


def test_live_writer_appends_whole_steps_and_stops(tmp_path):
    root = tmp_path / "demo"
    folder = demo.ensure_demo(root)
    live = folder / NAMES["live"]
    start = _max_step(live)
    index_before = len(_rows(live / "monitors/file/traces/stream.index.jsonl"))
    outside_before = sorted(p.name for p in tmp_path.iterdir())
    writer = demo.start_live_writer(root, interval_s=0.1)
    try:
        assert writer.daemon and writer.is_alive()
        assert demo.start_live_writer(root, interval_s=0.1) is writer  # one per root
        deadline = time.monotonic() + 10
        while _max_step(live) < start + 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _max_step(live) >= start + 3, writer.error
    finally:
        assert demo.stop_live_writer(root)
    assert not writer.is_alive()
    assert demo.stop_live_writer(root) is False

    data = (live / "monitors/file/metrics.jsonl").read_bytes()
    assert data.endswith(b"\n")
    rows = [json.loads(line) for line in data.splitlines()]  # no torn line anywhere
    end = max(r["step"] for r in rows if r["step"] is not None)
    new = [r for r in rows if r["step"] is not None and r["step"] > start]
    for step in range(start + 1, end + 1):
        mine = [r for r in new if r["step"] == step]
        assert sum(r["producer"] == "trainer" for r in mine) == 5, step
        assert sum(r["producer"] == "orch" and "progress/total_tokens" in r for r in mine) == 1, step
    assert rows[-1]["time"] == pytest.approx(time.time(), abs=30)
    assert any(r["step"] is None and r["time"] > time.time() - 30 for r in rows)
    assert (live / "trainer_step").read_text() == str(end)
    assert f"Step {end} |" in (live / "logs/attempt_1/trainer.log").read_text()
    assert f"Step {end} |" in (live / "logs/attempt_1/orchestrator.log").read_text()
    index = _rows(live / "monitors/file/traces/stream.index.jsonl")
    assert len(index) == index_before + (end - start)
    with open(live / "monitors/file/traces/stream/00000.jsonl", "rb") as fh:
        for row in index[index_before:]:
            fh.seek(row["offset"])
            assert json.loads(fh.readline())["id"] == row["id"]
    assert sorted(p.name for p in tmp_path.iterdir()) == outside_before
    assert rd.discover([folder]).set_index("name").loc[NAMES["live"], "status"] == "running"


def test_live_writer_continues_from_the_last_step_after_a_restart(tmp_path):
    root = tmp_path / "demo"
    live = demo.ensure_demo(root) / NAMES["live"]
    for _ in range(2):
        before = _max_step(live)
        demo.start_live_writer(root, interval_s=0.05)
        deadline = time.monotonic() + 10
        while _max_step(live) <= before and time.monotonic() < deadline:
            time.sleep(0.05)
        demo.stop_live_writer(root)
        assert _max_step(live) > before
    trainer_steps = [r["step"] for r in _rows(live / "monitors/file/metrics.jsonl")
                     if r["producer"] == "trainer" and "time/step" in r]
    assert trainer_steps == sorted(trainer_steps) and len(trainer_steps) == len(set(trainer_steps))


def test_live_writer_never_writes_outside_the_demo_folder(tmp_path):
    root = tmp_path / "demo"
    live = demo.ensure_demo(root) / NAMES["live"]
    outside = tmp_path / "outside.log"
    outside.write_text("untouched\n")
    log = live / "logs/attempt_1/trainer.log"
    log.unlink()
    log.symlink_to(outside)
    writer = demo.start_live_writer(root, interval_s=0.05)
    try:
        deadline = time.monotonic() + 10
        while writer.error is None and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        demo.stop_live_writer(root)
    assert writer.error and "outside the demo folder" in writer.error
    assert outside.read_text() == "untouched\n"


@pytest.mark.parametrize("kind", ["prime_rl", "verl", "swe_lego_rl", "relax"])
def test_a_kinds_demo_writer_imports_first_in_a_fresh_interpreter(kind):
    """The writers live in their source folders and use the demo package's shared modules: importing
    one before anything else works (the package imports its writers only where it uses them)."""
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-c", f"import rundash_core.sources.{kind}.demo_run as m; print(m.__name__)"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and res.stdout.strip() == f"rundash_core.sources.{kind}.demo_run", res.stderr[-2000:]
