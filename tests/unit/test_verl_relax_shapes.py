"""Every shape a verl console log or a Relax `rollout_result/` may take on a real machine, through
the public API only: the run opens and shows, its metrics are what the lines say (values, steps,
no duplicates, resumes counted), each bad input is a Problem naming the file, nothing raises.

verl logs are built from the real sample logs in `tests/data/verl/` (rewritten with CR-LF, Ray
prefixes, tqdm redraws, appended launches, …) and checked against the independent line reading
of `test_verl.py` (written from the format notes, not from rundash's code).
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

import rundash_core as rd

from helpers import MONTH_AGO, write_file, write_lines
from helpers.verl import DQ, EH, SFT, ref_lines, ref_merged, tidy_map

PREFIX = b"\x1b[36m(TaskRunner pid=4242, ip=10.0.0.7)\x1b[0m "


def sft_lines() -> list[bytes]:
    """The SFT sample log's physical lines, newline kept (135 lines, 59 steps)."""
    return SFT.read_bytes().splitlines(keepends=True)


def everything(run) -> None:
    """Every view a page asks for; none may raise."""
    run.metrics(), run.overview(), run.overview(), run.validation(), run.samples(), run.problems()
    run.attempts(), run.resume_steps(), run.config(), run.configs(), run.logs(), run.metrics_wide()


def whats(run) -> dict[str, rd.Problem]:
    return {p.what: p for p in run.problems()}


# verl: shapes of a whole log, against the independent reading -------------------------------------
def _crlf(data: bytes) -> bytes:
    return data.replace(b"\n", b"\r\n")


def _ray(data: bytes) -> bytes:
    """Every line under a coloured Ray actor prefix, every metric line with a dedup suffix."""
    return b"".join(PREFIX + (ln[:-1] + b"\x1b[32m [repeated 2x across cluster]\x1b[0m\n" if b"step:" in ln else ln)
                    for ln in data.splitlines(keepends=True))


def _tqdm(data: bytes) -> bytes:
    """tqdm redraws in front of each metric line, on the same physical line."""
    bar = b"Epoch 1/2:  50%|#####     | 5/10 [00:05<00:05, 1.00s/it]"
    lines = data.splitlines(keepends=True)
    return b"".join((bar + b"\r" + bar + ln if ln.startswith(b"step:") else ln) for ln in lines)


def _huge_line(data: bytes) -> bytes:
    """A printed tensor of 3 MiB on one line in the middle of the log."""
    mid = len(data) // 2
    mid = data.index(b"\n", mid) + 1
    return data[:mid] + b"tensor([" + b"0.1234, " * (3 << 17) + b"])\n" + data[mid:]


def _nul_and_bad_utf8(data: bytes) -> bytes:
    """A block of NUL bytes (a crash on a preallocated file) and stray invalid UTF-8 in noise."""
    mid = data.index(b"\n", len(data) // 2) + 1
    return data[:mid] + b"\x00" * 4096 + b"\xff\xfe noise \xc3(\n" + data[mid:]


SHAPES = {"crlf": _crlf, "ray-prefixes": _ray, "tqdm-redraws": _tqdm, "huge-line": _huge_line,
          "nul-and-bad-utf8": _nul_and_bad_utf8}


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("sample", [DQ, EH, SFT], ids=lambda p: p.name[:8])
def test_a_rewritten_sample_log_has_the_samples_metrics(tmp_path, sample, shape):
    """Same metrics, validation (line keys and pprints of every era), config and card as the
    sample itself. (Times can differ: `huge-line` pushes the SFT log's only stamps out of its
    head window, and a start time it cannot see leaves the duration unknown.)"""
    base = rd.open_run(sample)
    path = write_file(tmp_path / f"{shape}.log", SHAPES[shape](sample.read_bytes()))
    run = rd.open_run(path)
    everything(run)
    got = tidy_map(run)
    assert got == tidy_map(base)
    assert ref_merged(ref_lines(path.read_bytes())).items() <= got.items()  # + era S1's pprint validation rows
    assert run.validation().reset_index(drop=True).equals(base.validation().reset_index(drop=True))
    assert not run.validation().empty and run.config() == base.config() != {}
    card, want = run.overview(), base.overview()
    for field in ("step", "max_steps", "model", "attempts", "eval_envs", "finished", "flavor"):
        assert getattr(card, field) == getattr(want, field), field
    assert run.attempts() == [1]


def test_nul_bytes_and_bad_utf8_are_problems_naming_the_file(tmp_path):
    path = write_file(tmp_path / "nul.log", _nul_and_bad_utf8(SFT.read_bytes()) + b"step:59 - train/loss\xff:0.5\n")
    found = whats(rd.open_run(path))
    assert found["NUL bytes (removed)"].path == str(path)
    assert found["invalid UTF-8 in a metric line (replaced)"].line == path.read_bytes().count(b"\n")


def test_appended_launches_count_their_resumes_and_keep_the_newest_values(tmp_path):
    """The SFT log, then a resume from step 30 (values changed), then the whole log again
    (another run appended with `tee -a`): two places where the steps went back."""
    lines = sft_lines()
    resumed = [ln.replace(b"train/loss:0.0", b"train/loss:0.9") for ln in lines[lines.index(
        next(ln for ln in lines if ln.startswith(b"step:30 "))):]]
    data = b"".join(lines + resumed + lines)
    run = rd.open_run(write_file(tmp_path / "appended.log", data))
    got = tidy_map(run)
    assert got == ref_merged(ref_lines(data)) == tidy_map(rd.open_run(SFT))  # the last launch wins
    assert run.resume_steps() == [0, 30] and run.attempts() == [1, 2, 3] and run.overview().attempts == 3
    wide = run.metrics_wide()
    assert list(wide["step"]) == list(range(59))  # one row per step: no duplicate, no lost step


def test_a_log_resumed_into_a_new_file_starts_above_step_one(tmp_path):
    lines = sft_lines()
    start = lines.index(next(ln for ln in lines if ln.startswith(b"step:40 ")))
    run = rd.open_run(write_file(tmp_path / "resumed.log", b"".join(lines[:8] + lines[start:])))
    assert min(s for s, _k in tidy_map(run)) == 40
    assert run.resume_steps() == [40] and run.overview().attempts == 2 and run.overview().attempts == 2


def test_a_step_line_split_by_another_writer_loses_only_that_line(tmp_path):
    """Another process wrote into the middle of a metric line: that line no longer follows the
    grammar (spec 4.8), the lines around it are intact and nothing raises."""
    lines = sft_lines()
    at = lines.index(next(ln for ln in lines if ln.startswith(b"step:10 ")))
    cut = lines[at].index(b"train/lr")
    lines[at: at + 1] = [lines[at][:cut] + b"(WorkerDict pid=9) W: warning\n", b"  " + lines[at][cut:]]
    path = write_file(tmp_path / "split.log", b"".join(lines))
    run = rd.open_run(path)
    everything(run)
    got, whole = tidy_map(run), tidy_map(rd.open_run(SFT))
    assert got == ref_merged(ref_lines(path.read_bytes()))
    assert {k: v for k, v in whole.items() if k[0] != 10} == {k: v for k, v in got.items() if k[0] != 10}


def test_nan_inf_and_numpy_values(tmp_path):
    data = (b"step:1 - a:nan - b:inf - c:-inf - d:np.float64(nan) - e:1.5 - timing_s/step:10.0\n"
            b"step:2 - a:0.5 - timing_s/step:inf\nstep:3 - a:-nan - timing_s/step:nan\n"
            b"step:4 - timing_s/step:5.0\n")
    run = rd.open_run(write_file(tmp_path / "nan.log", data))
    got = tidy_map(run)
    assert got == ref_merged(ref_lines(data))
    assert (got[(1, "b")], got[(1, "c")], got[(2, "a")]) == (math.inf, -math.inf, 0.5) and (1, "a") not in got
    assert run.overview().duration_s == 15.0  # an infinite step time does not make the run last forever


def test_empty_config_only_and_binary_logs_show_with_a_problem(tmp_path):
    head = b"".join(ln for ln in sft_lines() if b"step:" not in ln)  # the config print, no metric line
    for name, data in (("empty", b""), ("config-only", head), ("binary", bytes(range(256)) * 64)):
        run = rd.open_run(write_file(tmp_path / f"{name}.log", data))
        everything(run)
        assert run.metrics().empty and run.overview().step is None and run.overview().status == "stopped"
        assert whats(run)["no metric lines yet"].path == str(tmp_path / f"{name}.log")
    assert rd.open_run(tmp_path / "config-only.log").config() == rd.open_run(SFT).config()
    frame = rd.discover([tmp_path]).set_index("run_id")
    assert sorted(frame.index) == ["binary", "config-only", "empty"] and frame["error"].isna().all()


def test_fresh_copies_keep_the_logs_own_times(tmp_path):
    """Copies (fresh file times) of a whole log and of its first part: times come from the
    stamps the log printed, not from the copy; a cut last metric line is a problem, the lines
    before it count. (A cut copy without a stamp after its start looks like a live run: running
    until its file time is a few minutes old.)"""
    data = DQ.read_bytes()
    whole = rd.open_run(write_file(tmp_path / "whole.log", data, mtime=None)).overview()
    assert (whole.status, whole.step, whole.started.isoformat(), whole.duration_s) == (
        "completed", 210, "2025-06-18T16:49:37+00:00", 85262.0)
    end = data.index(b"step:20 - ")
    path = write_file(tmp_path / "cut.log", data[: end + 40], mtime=None)
    run = rd.open_run(path)
    assert run.overview().step == 19 and run.overview().started == whole.started
    assert tidy_map(run) == ref_merged(ref_lines(path.read_bytes()))
    assert any("last line is incomplete" in p.what for p in run.problems())


def test_a_log_ending_in_mibs_of_other_output_shows_its_step_on_the_card(tmp_path):
    data = SFT.read_bytes() + b"tensor([" + b"0.1234, " * (1 << 18) + b"])\n"
    run = rd.open_run(write_file(tmp_path / "tail.log", data))
    assert run.overview().step == run.overview().last_step == 58


def test_a_file_logger_jsonl_alone_shows_its_last_step(tmp_path):
    rows = [{"step": s, "data": {"a": s / 2, "b": None}} for s in range(1, 2001)]
    path = tmp_path / "alone.jsonl"
    write_lines(path, [*rows, b"garbage", b'{"step": 2001, "data": NaN}'])
    with open(path, "ab") as fh:
        fh.write(b'{"step": 2002, "da')  # being written
    os.utime(path, (MONTH_AGO, MONTH_AGO))
    run = rd.open_run(path)
    everything(run)
    assert run.overview().step == run.overview().step == 2000 == rd.discover([tmp_path])["step"].iloc[0]
    assert tidy_map(run)[(2000, "a")] == 1000.0 and (1, "b") not in tidy_map(run)
    found = whats(run)
    assert found["not JSON"].line == 2001 and found["not JSON"].path == str(path)
    assert {p.path for p in run.problems() if p.line == 2002} == {str(path)}  # `"data": NaN`: no row


def test_a_file_logger_jsonl_restarted_by_a_resume_keeps_the_earlier_steps_from_the_log(tmp_path):
    """verl opens the file-logger JSONL with "wb": after a resume from step 3 it holds steps 3…7
    only, the log holds both launches. Steps 1-2 come from the log, 3… from the JSONL (full
    precision), and the resume is counted."""
    lines = [b"step:%d - a:%d.0 - timing_s/step:1.0\n" % (s, s) for s in range(1, 8)]
    log = write_file(tmp_path / "run.log", b"".join([b"Creating file logger at run.jsonl\n", *lines[:5],
                                                 b"Creating file logger at run.jsonl\n", *lines[2:]]))
    rows = [{"step": s, "data": {"a": s + 0.25, "timing_s/step": 2.0}} for s in range(3, 8)]
    write_lines(tmp_path / "run.jsonl", rows)
    os.utime(tmp_path / "run.jsonl", (MONTH_AGO, MONTH_AGO))
    run = rd.open_run(log)
    everything(run)
    assert tidy_map(run) == {**{(s, "a"): float(s) for s in (1, 2)}, **{(s, "a"): s + 0.25 for s in range(3, 8)},
                             **{(s, "timing_s/step"): 1.0 if s < 3 else 2.0 for s in range(1, 8)}}
    assert run.resume_steps() == [3] and run.attempts() == [1, 2] and run.overview().attempts == 2
    assert (run.overview().step, run.overview().duration_s) == (7, 10.0)  # the console log's step times (its pass)
    assert list(run.metrics_wide()["step"]) == [1, 2, 3, 4, 5, 6, 7]


def test_a_log_that_goes_away_while_shown(tmp_path):
    """Deleted or replaced (by a folder) after it was read, while its last line was being
    written: every view still answers, and the problem says so."""
    for name, replace in (("deleted", os.remove), ("replaced", lambda p: (os.remove(p), os.mkdir(p)))):
        path = write_file(tmp_path / f"{name}.log", b"step:1 - a:1.0\nstep:2 - a:", mtime=None)
        run = rd.open_run(path)
        assert not run.metrics().empty
        replace(path)
        everything(run)
        assert [p.path for p in run.problems()] == [str(path)]


def test_missing_files_and_broken_symlinks(tmp_path):
    write_file(tmp_path / "ok.log", b"step:1 - a:1.0\n")
    os.symlink(tmp_path / "nowhere.log", tmp_path / "broken.log")
    os.symlink(tmp_path / "nowhere.jsonl", tmp_path / "ok.jsonl")  # a file logger that is not there
    for path in (tmp_path / "missing.log", tmp_path / "broken.log"):
        with pytest.raises(rd.RunError, match=str(path.name)):
            rd.open_run(path)
    run = rd.open_run(tmp_path / "ok.log")
    assert tidy_map(run) == {(1, "a"): 1.0} and run.problems() == []
    assert list(rd.discover([tmp_path])["run_id"]) == ["ok"]


# Relax ------------------------------------------------------------------------------------------
def relax_row(step: int, index: int, **kw) -> dict:
    return {"rollout_id": step, "sample_index": index, "prompt": "p", "response": "r", "reward": 1.0,
            "response_length": 10, "total_length": 30, "status": "completed", "group_index": index // 2,
            "model": "org/m", **kw}


def relax_file(path: Path, rows: list) -> Path:
    """Rows as Relax writes them (Python's json: NaN/Infinity written bare)."""
    write_lines(path, [r if isinstance(r, (bytes, str)) else json.dumps(r) for r in rows])
    return path


def test_nan_and_infinite_rewards_are_left_out_and_counted(tmp_path):
    train = tmp_path / "s" / "rollout_result" / "train"
    path = relax_file(train / "1.jsonl", [relax_row(1, 0, reward=float("nan")), relax_row(1, 1, reward=float("inf")),
                                          relax_row(1, 2, reward={"score": -math.inf}), relax_row(1, 3, reward=0.5)])
    run = rd.open_run(tmp_path / "s")
    got = {m: v for m, v in zip(run.metrics()["metric"].astype(str), run.metrics()["value"])}
    assert (got["rollout/reward/mean"], got["rollout/reward/std"], got["rollout/reward/count"]) == (0.5, 0.0, 1.0)
    assert got["rollout/samples"] == 4.0
    found = whats(run)
    assert found["reward is infinite: left out of reward stats"].line == 2
    assert found["reward not a number: left out of reward stats"].path == str(path)


def test_every_sample_opens_even_with_nan_and_bad_bytes(tmp_path):
    """A row with NaN (as Python writes it), bad UTF-8 or NUL bytes was read into the samples:
    its episode opens too, and the card names the model of a first row holding NaN."""
    train = tmp_path / "s" / "rollout_result" / "train"
    utf8 = json.dumps(relax_row(0, 1, response="caf\u00e9"), ensure_ascii=False).encode()
    latin1 = utf8.replace(b"\xc3\xa9", b"\xe9")
    relax_file(train / "0.jsonl", [relax_row(0, 0, reward=float("nan")), latin1,
                                   b"\x00" + json.dumps(relax_row(0, 2)).encode()])
    run = rd.open_run(tmp_path / "s")
    samples = run.samples()
    assert list(samples["sample_id"]) == ["train-0-0", "train-0-1", "train-0-2"]
    episodes = [run.episode(s) for s in samples["sample_id"]]
    assert [e.reward for e in episodes] == [None, 1.0, 1.0] and episodes[1].messages[1].content == "caf\ufffd"
    assert run.overview().model == "org/m"
    path, before = train / "0.jsonl", os.stat(train / "0.jsonl")
    path.write_bytes(b" " * before.st_size)  # rewritten in place, same size and time: the old reading
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # points at blanks
    with pytest.raises(KeyError, match="cannot be read"):
        run.episode("train-0-2")
    with pytest.raises(KeyError, match="no sample"):
        run.episode("train-0-9")


def test_truncated_garbage_and_no_final_newline(tmp_path):
    train = tmp_path / "s" / "rollout_result" / "train"
    relax_file(train / "0.jsonl", [relax_row(0, 0), b"{not json", b"[1, 2]", relax_row(0, 1, status=None)])
    (train / "1.jsonl").write_bytes(json.dumps(relax_row(1, 0)).encode())  # no final newline: still read
    (train / "2.jsonl").write_bytes(json.dumps(relax_row(2, 0)).encode() + b'\n{"rollout_id": 2, "sam')
    run = rd.open_run(tmp_path / "s")
    everything(run)
    samples = run.samples()
    assert samples.groupby("step").size().to_dict() == {0: 2, 1: 1, 2: 1}
    found = {(Path(p.path).name, p.what) for p in run.problems()}
    assert {("0.jsonl", "truncated JSON line"), ("0.jsonl", "not a JSON object"),
            ("2.jsonl", "incomplete last line (still being written, or the writer stopped)")} <= found


def test_numbers_too_big_for_a_column_are_problems_not_tracebacks(tmp_path):
    """Garbage integers (wider than int64, or than a float) in a row or a step file's name."""
    train = tmp_path / "s" / "rollout_result" / "train"
    relax_file(train / "1.jsonl", [relax_row(1, 0, response_length=10**30, group_index=10**25, reward=10**400),
                                   relax_row(1, 1, sample_index=-10**20)])
    relax_file(train / f"{10**23}.jsonl", [relax_row(2, 0)])
    run = rd.open_run(tmp_path / "s")
    everything(run)
    assert set(run.metrics()["step"]) == {1} and run.overview().step == 1 and len(run.samples()) == 2
    found = {(Path(p.path).name, p.what) for p in run.problems()}
    assert {(f"{10**23}.jsonl", "step number too large (ignored)"),
            ("1.jsonl", "reward not a number: left out of reward stats"),
            ("1.jsonl", "response_length missing or not an integer: left out of length stats")} <= found
    logger = write_lines(tmp_path / "big.jsonl", [{"step": 1, "data": {"a": 1}}, {"step": 10**23, "data": {"a": 2}}])
    assert logger and rd.open_run(tmp_path / "big.jsonl").overview().step == 1


def test_an_empty_rollout_result_is_a_run_with_a_problem(tmp_path):
    (tmp_path / "s" / "rollout_result").mkdir(parents=True)
    for path in (tmp_path / "s", tmp_path / "s" / "rollout_result"):
        run = rd.open_run(path)
        everything(run)
        assert run.run_id == "s" and run.metrics().empty and run.overview().status == "unknown"
        assert [p.path for p in run.problems()] == [str(tmp_path / "s" / "rollout_result")]
    assert list(rd.discover([tmp_path])["run_id"]) == ["s"]


def test_broken_symlinks_and_folders_named_like_steps_are_problems_not_file_times(tmp_path):
    """A folder named like a step file has a fresh time of its own: the run is not "running" for
    it, nor did it last a month; the step is still the highest name (`test_relax`)."""
    train = tmp_path / "s" / "rollout_result" / "train"
    relax_file(train / "0.jsonl", [relax_row(0, 0)])
    os.utime(train / "0.jsonl", (MONTH_AGO, MONTH_AGO))
    os.symlink(train / "nowhere", train / "5.jsonl")
    (train / "9.jsonl").mkdir()
    run = rd.open_run(tmp_path / "s")
    everything(run)
    ov = run.overview()
    assert (ov.step, ov.status, ov.duration_s, ov.updated) == (9, "stopped", None, None)  # Relax logs no times
    assert ov.touched.timestamp() == pytest.approx(MONTH_AGO)  # the step file's time only says it is not running
    found = {Path(p.path).name: p.what for p in run.problems()}
    assert found == {"5.jsonl": "broken symlink", "9.jsonl": "not a regular file"}
    assert set(run.metrics()["step"]) == {0}


def test_a_file_logger_number_too_wide_for_a_float_is_a_problem(tmp_path):
    """Python's json writes any int: a 400-digit value (or a step past int64) in the file-logger
    JSONL is left out and named, the rest of its row kept; `metrics()` does not raise."""
    rows = [{"step": s, "data": {"a": s / 2, "huge": 10 ** 400 if s == 2 else s, "wide": 2 ** 70}} for s in (1, 2, 3)]
    path = tmp_path / "wide.jsonl"
    write_lines(path, [*rows, {"step": 2 ** 64, "data": {"a": 1.0}}])
    os.utime(path, (MONTH_AGO, MONTH_AGO))
    run = rd.open_run(path)
    everything(run)
    got = tidy_map(run)
    assert got[(2, "a")] == 1.0 and (2, "huge") not in got and got[(3, "huge")] == 3.0
    assert got[(1, "wide")] == float(2 ** 70)
    lines = {p.line: p.what for p in run.problems() if p.path == str(path)}
    assert "too large" in lines[2] and "not a file-logger row" in lines[4]
