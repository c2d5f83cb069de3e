"""Log files of a run (`run.logs()`) and their lines (`run.read_log()`): listings per kind, byte
ranges only, paging back, following appended bytes, merging by time, filters, bad input."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pandas as pd
import pytest

import rundash_core as rd
from benchmarks.common import counted_reads
from rundash_core import frames
from rundash_core.logs import line as logtext
from rundash_core.logs import reading as logs
from rundash_core.logs import view as logview
from rundash_core.safety.gate import gated
from rundash_core.safety.user_regex import compile_user_pattern
from rundash_core.views.display_text import abbrev_count

from helpers import DATA, NEW_RUN, copy_run, make_rl_run

ESC = "\x1b"


def loguru(hms: str, level: str, msg: str) -> str:
    """A loguru line exactly as prime-rl writes it (spec 3.2)."""
    code = {"INFO": "\x1b[1m", "WARNING": "\x1b[33m\x1b[1m", "ERROR": "\x1b[31m\x1b[1m", "DEBUG": "\x1b[34m\x1b[1m",
            "SUCCESS": "\x1b[32m\x1b[1m"}[level]
    return f"\x1b[2m{hms}\x1b[0m {code}{level:>7}\x1b[0m {code}\x1b[22m{msg}\x1b[0m\x1b[0m\n"


def write(path: Path, text: str | bytes, *, mtime: float | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def spec(path: Path, component: str = "trainer") -> logs.LogSpec:
    return logs.LogSpec(str(path), str(path), component)


def big_log(path: Path, n: int) -> bytes:
    data = "".join(loguru(f"{10 + i // 3600 % 10:02d}:{i // 60 % 60:02d}:{i % 60:02d}", "INFO", f"line {i} " + "x" * 60)
                   for i in range(n)).encode()
    write(path, data, mtime=time.time() - 60)
    return data


# Listings ---------------------------------------------------------------------------------------
def test_prime_rl_lists_every_component_by_attempt(tmp_path):
    run = make_rl_run(tmp_path, "r--m--0123abcd")
    a1, a2 = run / "logs" / "attempt_1", run / "logs" / "attempt_2"
    for rel in ("trainer.log", "orchestrator.log", "inference.log", "envs/train/math.log", "envs/eval/gsm8k.log",
                "trainer/torchrun/88fc/attempt_0/0/stdout.log", "trainer/torchrun/88fc/attempt_0/1/stderr.log"):
        write(a1 / rel, "x\n")
    write(a2 / "trainer" / "node_0.log", "n0\n")
    write(a2 / "trainer" / "node_1.log", "n1\n")
    os.symlink("trainer/node_0.log", a2 / "trainer.log")  # multi-node: the master is a link to node 0
    write(a2 / "inference" / "node_0.log", "i\n")
    write(a2 / "inference" / "router.log", "r\n")
    write(a2 / "evals.log", "e\n")
    write(run / "launcher" / "logs" / "job_77.log", "j\n")
    os.symlink("attempt_2", run / "logs" / "latest2")  # not a log: never listed
    listing = rd.open_run(run).logs()
    assert frames.check(listing, frames.LOGS) == []
    one = listing[listing["attempt"] == 1]
    assert list(one["component"]) == ["trainer", "orchestrator", "inference", "router", "env:gsm8k", "env:math",
                                       "rank:0", "rank:1"]
    router = one[one["component"] == "router"]["path"].item()
    assert router == str(a1 / "inference.log") + logs.ROUTER_SUFFIX  # single node: a virtual entry
    two = listing[listing["attempt"] == 2]
    assert list(two["component"]) == ["trainer", "trainer", "inference", "router", "evals"]
    assert str(a2 / "trainer.log") in set(two["path"]) and str(a2 / "trainer" / "node_0.log") not in set(two["path"])
    assert not any(p.endswith(logs.ROUTER_SUFFIX) for p in two["path"])  # a real router.log: no virtual entry
    launcher = listing[listing["component"] == "launcher"]
    assert launcher["attempt"].isna().all() and len(launcher) == 1
    assert (listing["size"].dropna() > 0).all() and listing["updated"].notna().all()
    assert "logs" in rd.open_run(run).capabilities


def test_the_sample_runs_logs_and_pickers():
    run = rd.open_run(NEW_RUN)
    listing = run.logs()
    assert logview.attempts(listing) == [1, 2]
    entries = logview.groups(logview.for_attempt(listing, 2))
    assert list(entries) == ["trainer", "orchestrator", "inference", "router", "envs"]
    assert len(entries["envs"]) == 3  # env logs are one entry
    assert logview.default_groups(list(entries)) == ["trainer", "orchestrator", "inference", "envs"]
    paths = logview.merged_paths(entries, ["trainer", "envs"])
    assert paths[0].endswith("attempt_2/trainer.log") and len(paths) == 4


def test_verl_and_lego_list_their_console_log_and_ray_actors():
    verl = rd.open_run(DATA / "verl" / "dq_math.log")
    listing = verl.logs()
    assert list(listing["component"]) == ["console"] and "logs" in verl.capabilities
    lines = verl.read_log(list(listing["path"]), tail=400)
    actors = logview.actors_in(lines)
    assert {"TaskRunner", "WorkerDict", "raylet"} <= set(actors)
    only = verl.read_log(list(listing["path"]), tail=50, actors=["TaskRunner"])
    assert len(only) == 50
    assert all(logtext.ray_actor(logtext.strip_ansi(t))[0] == "TaskRunner" for t in only["text"])
    lego = rd.open_run(DATA / "lego" / "logs" / "qwen3-8b-swegym-gspo-async-r1.log")
    assert list(lego.logs()["component"]) == ["console", "inference"]  # the _vllm.log sidecar


def test_relax_has_no_logs():
    run = rd.open_run(DATA / "relax" / "relax-run")
    assert "logs" not in run.capabilities and run.logs().empty and run.read_log([]).empty


def test_read_log_refuses_a_path_the_run_does_not_list(tmp_path):
    run = rd.open_run(NEW_RUN)
    with pytest.raises(ValueError, match="not a log of this run"):
        run.read_log([str(DATA / "verl" / "dq_math.log")])


# Byte ranges --------------------------------------------------------------------------------------
def test_tail_reads_only_the_end_of_a_big_file(tmp_path):
    path = tmp_path / "trainer.log"
    data = big_log(path, 60_000)  # ~7 MB
    with counted_reads() as read:
        frame = logs.read_specs([spec(path)], tail=100)
    assert frames.check(frame, frames.LOG_LINES) == []
    assert read.bytes < 600_000 < len(data)
    want = data.decode().splitlines()[-100:]
    assert list(frame["text"]) == want  # ANSI kept
    for off, text in zip(frame["offset"], frame["text"]):
        assert data[off:off + len(text.encode())].decode() == text
    assert frame.attrs["ends"][str(path)] == len(data)


def test_load_older_pages_back_without_gap_or_overlap(tmp_path):
    path = tmp_path / "trainer.log"
    data = big_log(path, 30_000)
    lines = data.decode().splitlines()
    first = logs.read_specs([spec(path)], tail=1000)
    with counted_reads() as read:
        older = logs.read_specs([spec(path)], tail=1000, before=first.attrs["older"])
    assert list(older["text"]) + list(first["text"]) == lines[-2000:]
    assert read.bytes < 1_000_000
    oldest = logs.read_specs([spec(path)], tail=100_000, before=1000)  # the very start
    assert oldest.attrs["older"][str(path)] == 0 and list(oldest["text"]) == lines[:len(oldest)]


def test_a_tail_across_many_blocks_holds_each_line_once_and_whole(tmp_path):
    """Lines of every length across the 256 KB → 4 MB blocks of a walk back: the tail is the
    file's lines exactly (no line cut at a block's edge, none twice), each byte read once, and the
    page before it ends where it starts."""
    path = tmp_path / "trainer.log"
    lines = [f"12:{i // 60 % 60:02d}:{i % 60:02d} INFO line {i} " + "p" * (i * 7 % 97) for i in range(60_000)]
    write(path, "\n".join(lines) + "\n", mtime=time.time() - 60)
    with counted_reads() as read:
        tail = logs.read_specs([spec(path)], tail=50_000)
    assert list(tail["text"]) == lines[-50_000:]
    assert read.bytes <= path.stat().st_size
    older = logs.read_specs([spec(path)], tail=50_000, before=tail.attrs["older"])
    assert list(older["text"]) == lines[:-50_000] and older.attrs["older"] == {str(path): 0}


def test_a_line_of_megabytes_is_shown_once_by_its_ends(tmp_path):
    """A 6 MB line (a tensor printed whole) between short ones: one line, its head (time, level)
    and its end around a note of its size, the lines before it still shown; a filter finds it by
    its head; one appended while followed is cut the same way."""
    path = tmp_path / "trainer.log"
    before = [loguru(f"08:00:{i:02d}", "INFO", f"line {i}") for i in range(30)]
    huge = "08:01:00 WARNING batch " + "x" * (6 << 20) + " END\n"
    write(path, "".join(before) + huge + loguru("08:02:00", "INFO", "after"), mtime=time.time() - 60)
    with counted_reads() as read:
        frame = logs.read_specs([spec(path)], tail=100)
    assert len(frame) == 32 and frame["text"].iloc[31].endswith("after\x1b[0m\x1b[0m")
    long = frame.iloc[30]
    assert long["level"] == "WARNING" and long["time"] > frame["time"].iloc[29]
    assert long["text"].startswith("08:01:00 WARNING batch xxx") and long["text"].endswith("xxx END")
    assert "6.0 MB line: its middle is not shown" in long["text"] and len(long["text"]) < 200_000
    assert read.bytes < path.stat().st_size + 200_000
    found = logs.read_specs([spec(path)], tail=100, pattern="WARNING batch")
    assert len(found) == 1 and found["offset"].iloc[0] == long["offset"]
    with open(path, "a") as fh:
        fh.write("08:03:00 ERROR dump " + "y" * (3 << 20) + "\n")
    new = logs.read_specs([spec(path)], tail=100, after=frame.attrs["ends"])
    assert list(new["level"]) == ["ERROR"] and "3.0 MB line" in new["text"].item() and len(new["text"].item()) < 200_000


def test_follow_reads_only_appended_bytes_and_holds_a_torn_line(tmp_path):
    path = tmp_path / "orchestrator.log"
    write(path, loguru("08:00:00", "INFO", "start"))
    first = logs.read_specs([spec(path, "orchestrator")], tail=100)
    added = loguru("08:00:01", "INFO", "step 1") + loguru("08:00:02", "WARNING", "slow")
    with open(path, "a") as fh:
        fh.write(added + "\x1b[2m08:00:0")  # a writer mid-line
    with counted_reads() as read:
        new = logs.read_specs([spec(path, "orchestrator")], tail=100, after=first.attrs["ends"])
    assert [logtext.strip_ansi(t) for t in new["text"]] == ["08:00:01    INFO step 1", "08:00:02 WARNING slow"]
    torn = len("\x1b[2m08:00:0")
    assert read.bytes == 1 + len(added.encode()) + torn  # the byte before, then only what was appended
    assert new.attrs["ends"][str(path)] == path.stat().st_size - torn
    with open(path, "a") as fh:
        fh.write("3\x1b[0m \x1b[1m   INFO\x1b[0m done\n")
    last = logs.read_specs([spec(path, "orchestrator")], tail=100, after=new.attrs["ends"])
    assert list(last["level"]) == ["INFO"] and "done" in last["text"].item() and not last.attrs["reset"]
    write(path, loguru("09:00:00", "ERROR", "new file"))  # rotated: shorter than what was read
    again = logs.read_specs([spec(path, "orchestrator")], tail=100, after=last.attrs["ends"])
    assert again.attrs["reset"] and list(again["level"]) == ["ERROR"]


def test_follow_notices_a_file_replaced_at_the_same_size(tmp_path):
    path = tmp_path / "trainer.log"
    write(path, loguru("08:00:00", "INFO", "aaaa"), mtime=time.time() - 60)
    first = logs.read_specs([spec(path)], tail=100)
    quiet = logs.read_specs([spec(path)], tail=100, after=first.attrs["ends"], seen=first.attrs["versions"])
    assert quiet.empty and not quiet.attrs["reset"]  # nothing appended, nothing replaced
    fresh = tmp_path / "new.log"
    write(fresh, loguru("09:00:00", "INFO", "bbbb"))  # same length, another file renamed over it
    os.replace(fresh, path)
    assert path.stat().st_size == first.attrs["ends"][str(path)]
    again = logs.read_specs([spec(path)], tail=100, after=quiet.attrs["ends"], seen=quiet.attrs["versions"])
    assert again.attrs["reset"] and "bbbb" in again["text"].item()
    with open(path, "r+") as fh:  # rewritten in place, same size, same inode
        fh.write(loguru("10:00:00", "INFO", "cccc"))
    os.utime(path, ns=(again.attrs["versions"][str(path)][2] + 10**9,) * 2)
    third = logs.read_specs([spec(path)], tail=100, after=again.attrs["ends"], seen=again.attrs["versions"])
    assert third.attrs["reset"] and "cccc" in third["text"].item()


# Parsing, merging, filters -------------------------------------------------------------------------
def test_merge_interleaves_by_time_and_continuations_inherit(tmp_path):
    now = time.time()
    tr = write(tmp_path / "trainer.log", loguru("08:00:00", "INFO", "a") + loguru("08:00:02", "ERROR", "boom")
               + "Traceback (most recent call last):\n  File \"x.py\", line 1\n" + loguru("08:00:04", "INFO", "c"), mtime=now)
    orch = write(tmp_path / "orchestrator.log", loguru("08:00:01", "INFO", "b") + loguru("08:00:03", "INFO", "d"), mtime=now)
    frame = logs.read_specs([spec(tr), spec(orch, "orchestrator")], tail=100)
    plain = [logtext.strip_ansi(t).split(" ")[-1] for t in frame["text"]]
    assert plain == ["a", "b", "boom", "last):", "1", "d", "c"]
    assert list(frame["component"]) == ["trainer", "orchestrator", "trainer", "trainer", "trainer", "orchestrator", "trainer"]
    tb = frame[frame["text"].str.startswith("Traceback")].iloc[0]
    assert tb["level"] == "ERROR" and tb["time"] == frame["time"].iloc[2]  # the record's level and time
    assert frame["time"].is_monotonic_increasing
    assert frame["time"].iloc[0].tz is not None and frame["time"].iloc[-1] - frame["time"].iloc[0] == pd.Timedelta(seconds=4)
    errors = logs.read_specs([spec(tr), spec(orch, "orchestrator")], tail=100, levels=["ERROR"])
    assert len(errors) == 3 and set(errors["level"]) == {"ERROR"}  # the record and its traceback
    merged_tail = logs.read_specs([spec(tr), spec(orch, "orchestrator")], tail=2)
    assert [logtext.strip_ansi(t)[-1] for t in merged_tail["text"]] == ["d", "c"]
    assert merged_tail.attrs["older"] == {str(tr): frame["offset"].iloc[6], str(orch): frame["offset"].iloc[5]}


def test_regex_filter_runs_on_re2_and_a_bad_pattern_is_said(tmp_path):
    path = big_log(tmp_path / "t.log", 2000) and tmp_path / "t.log"
    hits = logs.read_specs([spec(path)], tail=100, pattern=r"line 1\d{3} ")
    assert len(hits) == 100 and all("line 1" in t for t in hits["text"])
    none = logs.read_specs([spec(path)], tail=100, pattern="(a+)+$")  # no backtracking blow-up
    assert none.empty and none.attrs["error"] is None
    secret = write(tmp_path / "s.log", "launch OPENAI_API_KEY=sk-abcdefghijklmnopqrstuvwxyz0123456789 now\n")
    assert logs.read_specs([spec(secret)], tail=10, pattern="launch").shape[0] == 1
    assert logs.read_specs([spec(secret)], tail=10, pattern="sk-abc").empty  # a secret cannot be probed by regex
    bad = logs.read_specs([spec(path)], tail=100, pattern="(?<=x)y")
    assert bad.empty and bad.attrs["error"].startswith("invalid regex")
    assert logtext.levels_at_least("WARNING") == ["WARNING", "ERROR", "CRITICAL"]


@pytest.mark.parametrize("bad_utf8", [False, True])
def test_a_filter_finds_exactly_the_lines_a_line_by_line_search_finds(tmp_path, bad_utf8):
    """The block scan that picks a filter's lines agrees with searching each line alone, on
    anchors, classes that could cross a newline, colour, torchrun prefixes, CR-LF, tqdm redraws,
    NUL bytes and (a block that is not UTF-8) the line-by-line fallback."""
    lines = [loguru("08:00:01", "INFO", "step 1"), "[default0]:" + loguru("08:00:02", "WARNING", "step 12 slow"),
             "INFO plain step 3\r\n", "progress 10%\rprogress 90%\rINFO done step 4\n", "a\x00b step 5\n",
             "zzz\n", "b at start\n", "ends with a\n", "INFO x" + ("\xff" if bad_utf8 else "y") + " step 6\n"]
    data = "".join(lines).encode("latin-1" if bad_utf8 else "utf-8")
    path = write(tmp_path / "f.log", data)
    raws = data.split(b"\n")[:-1]
    for text in (r"^INFO", r"step \d+$", r"a\sb", r"[^q]+z", r"^b", r"a$", r"step 1\b", r"done", r"\Azzz\z", "ab step",
                 r"^08:00:02 WARN"):
        pattern, error = compile_user_pattern(text)
        want = [logtext.parse(r).text for r in raws if pattern.search(logtext.plain_text(r))]
        got = logs.read_specs([spec(path)], tail=100, pattern=text)
        assert list(got["text"]) == want and (want or text == r"a\sb"), text  # a\sb: only across a newline


def test_line_formats():
    line = logtext.parse(b"[default1]:" + loguru("08:38:14", "WARNING", "slow").rstrip().encode())
    assert line.level == "WARNING" and line.stamp.time_of_day == 8 * 3600 + 38 * 60 + 14
    assert line.text.startswith(ESC) and line.plain == "08:38:14 WARNING slow"  # torchrun prefix cut, ANSI kept
    vllm = logtext.parse(b"(APIServer pid=3134) INFO 09-24 08:19:49 [__init__.py:241] Automatically detected")
    assert vllm.actor == "APIServer" and vllm.level == "INFO" and vllm.stamp.month_day == (9, 24)
    ray = logtext.parse(b"\x1b[36m(TaskRunner pid=247607)\x1b[0m step:1 - a:1")
    assert ray.actor == "TaskRunner" and ray.level is None
    old = logtext.parse(b"(wiQkzJWorkerDict_0:0 WorkerDict pid=12, ip=10.0.0.1) INFO: saved")
    assert old.actor == "WorkerDict" and old.level == "INFO"
    cpp = logtext.parse(b"\x1b[36m(WorkerDict pid=679234)\x1b[0m [2025-06-19 16:30:39,118 E 679234 679666] logging.cc:497: x")
    assert cpp.level == "ERROR" and cpp.stamp.when.year == 2025
    js = logtext.parse(b'{"timestamp": "2026-09-01T12:00:00.123456+00:00", "level": "INFO", "message": "hi", "exception": "Trace"}')
    assert js.level == "INFO" and js.text == "hi\nTrace" and js.stamp.when.timestamp() == pytest.approx(1788264000.123456)
    tqdm = logtext.parse(b"Training Progress:  1%|\r Training Progress:  2%|\r\n")
    assert tqdm.text == " Training Progress:  2%|"
    glog = logtext.parse(b"W1217 07:20:03.820820 140031002564416 torch/distributed/run.py:779] Setting OMP")
    assert glog.level == "WARNING" and glog.stamp.month_day == (12, 17) and glog.stamp.time_of_day == 7 * 3600 + 1203
    absl = logtext.parse(b"(WorkerDict pid=7) E0102 23:59:59.000001    12 xla_bridge.py:9] no TPU")
    assert absl.actor == "WorkerDict" and absl.level == "ERROR" and absl.stamp.month_day == (1, 2)
    assert logtext.parse(b"F0102 00:00:00.000001 1 check.cc:3] Check failed").level == "CRITICAL"
    assert logtext.parse(b"I1217 is not a record").level is None  # the shape, not the first letter
    router = logtext.parse(b"2026-09-24T08:19:44.123Z  INFO vllm_router::server: routing to worker 1")
    assert router.router and router.level == "INFO"
    assert not logtext.parse(b"(APIServer pid=1) INFO 09-24 08:19:49 [x.py:1] engine").router


def test_single_node_router_lines_are_their_own_entry(tmp_path):
    run = make_rl_run(tmp_path, "r--m--0123abcd")
    write(run / "logs" / "attempt_1" / "inference.log",
          "(APIServer pid=1) INFO 09-24 08:19:49 [x.py:1] engine up\n"
          "2026-09-24T08:19:50Z  INFO vllm_router::server: worker 1 ready\n"
          "(APIServer pid=1) INFO 09-24 08:19:51 [x.py:1] engine serving\n")
    r = rd.open_run(run)
    listing = r.logs()
    engine = r.read_log(list(listing[listing["component"] == "inference"]["path"]))
    router = r.read_log(list(listing[listing["component"] == "router"]["path"]))
    assert [t.split()[-1] for t in engine["text"]] == ["up", "serving"]
    assert [t.split()[-1] for t in router["text"]] == ["ready"] and set(router["component"]) == {"router"}


def test_dates_step_back_a_day_at_midnight(tmp_path):
    mtime = pd.Timestamp("2026-09-02 00:00:30").timestamp()  # local wall time, as loguru writes
    path = write(tmp_path / "t.log", loguru("23:59:58", "INFO", "late") + loguru("00:00:01", "INFO", "early"), mtime=mtime)
    frame = logs.read_specs([spec(path)], tail=10)
    days = [pd.Timestamp(t.timestamp(), unit="s").tz_localize("UTC").tz_convert(None) for t in frame["time"]]
    local = [pd.Timestamp.fromtimestamp(t.timestamp()) for t in frame["time"]]
    assert [str(x.date()) for x in local] == ["2026-09-01", "2026-09-02"] and days[1] - days[0] == pd.Timedelta(seconds=3)


def test_copied_run_dates_its_loguru_lines_by_the_dated_logs(tmp_path):
    """Copies carry fresh mtimes; vLLM and env lines say their date: a merged view stays in order."""
    run = copy_run(NEW_RUN, tmp_path)
    r = rd.open_run(run)
    listing = logview.for_attempt(r.logs(), 2)
    frame = r.read_log(logview.merged_paths(logview.groups(listing), ["trainer", "inference", "envs"]), tail=5000)
    assert frame["time"].is_monotonic_increasing
    assert frame["time"].dt.strftime("%Y-%m-%d").iloc[-1] == "2026-09-24"
    assert set(frame["component"]) >= {"trainer", "inference", "env:math-python"}


# Bad input ---------------------------------------------------------------------------------------
def test_bad_bytes_missing_files_and_links_are_named_not_raised(tmp_path):
    path = write(tmp_path / "t.log", b"ok \xff\xfe bad utf8\nnul\x00byte\n" + loguru("08:00:00", "INFO", "fine").encode())
    missing = tmp_path / "gone.log"
    os.symlink(tmp_path / "nowhere.log", tmp_path / "broken.log")
    (tmp_path / "dir.log").mkdir()
    frame = logs.read_specs([spec(path), spec(missing), spec(tmp_path / "broken.log"), spec(tmp_path / "dir.log")], tail=10)
    assert list(frame["text"])[:2] == ["ok \ufffd\ufffd bad utf8", "nulbyte"]
    problems = {Path(p.path).name: p.what for p in frame.attrs["problems"]}
    assert problems == {"gone.log": "no such file or directory", "broken.log": "broken symlink",
                        "dir.log": "not a regular file"}


# Presentation ------------------------------------------------------------------------------------
def test_lines_render_as_escaped_coloured_html():
    text = "\x1b[31m\x1b[1mERROR\x1b[0m <script>alert(1)</script> <img src=x onerror=alert(2)> & \"q\" \x1b[2K"
    out = logview.line_html(text)
    assert "<script" not in out and "<img" not in out and "&lt;script&gt;" in out and "&lt;img src=x" in out
    assert '<span style="color:#d1242f;font-weight:600">ERROR</span>' in out and "\x1b" not in out
    plain = logview.line_html("<script>alert(1)</script> <img src=x onerror=alert(2)>")  # no colour: the short path
    assert plain == "&lt;script&gt;alert(1)&lt;/script&gt; &lt;img src=x onerror=alert(2)&gt;"
    frame = frames.typed({"time": [pd.Timestamp("2026-09-01 08:00", tz="UTC")], "component": ["<b>c</b>"],
                          "level": ["ERROR"], "text": [text], "path": ["p"], "offset": [0]}, frames.LOG_LINES)
    pane = logview.pane_html(frame, show_component=True)
    assert "<b>" not in pane and "&lt;b&gt;c&lt;/b&gt;" in pane and "overflow:auto" in pane
    secret = frames.typed({"text": ["key sk-abcdefghijklmnopqrstuvwxyz0123456789"], "level": ["INFO"], "path": ["p"]},
                          frames.LOG_LINES)  # hidden by the gate, which run.read_log answers through
    assert "sk-abc" not in logview.pane_html(gated(secret), show_component=False)


def test_abbreviated_counts():
    assert [abbrev_count(n) for n in (0, 999, 1000, 12_345, 999_950, 1_234_567, None)] == [
        "0", "999", "1k", "12.3k", "1M", "1.2M", "n/a"]
    assert logview.count_label(12_345) == "12.3k lines"


@pytest.mark.parametrize("escape", ["\x1b[31m", "\x1b[2K", "\x1b[?25l", "\x1b]0;title\x07", "\x1b]8;;http://x\x1b\\",
                                    "\x1b]0;unterminated", "\x1bM", "\x1b"])
def test_one_escape_pattern_for_plain_lines_blocks_html_and_the_terminal(escape):
    """logs.line.ANSI is the one escape pattern: a plain line, a byte block, the HTML view and the
    TUI all drop the same escapes (an unterminated OSC only up to its line end)."""
    from rundash_core.logs.blocks import plain_block
    from rundash_core.tui.highlight import clean
    text = f"loss {escape}0.5"
    want = "loss " if escape == "\x1b]0;unterminated" else "loss 0.5"
    assert logtext.plain_text(text.encode()) == want
    assert plain_block(f"{text}\nnext\n".encode()) == f"{want}\nnext\n".encode()
    assert "".join(t for t, _ in logview.ansi_segments(text)) == want
    assert clean(text) == want
