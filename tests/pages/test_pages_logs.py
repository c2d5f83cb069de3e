"""The Logs page through AppTest: merged and split panes, pickers bound to the URL, filters, Ray
actors, load older, follow (appended bytes only) and escaping."""
from __future__ import annotations

import os
import re
import time

import rundash_core as rd
from benchmarks.common import counted_reads

from helpers import make_rl_run, open_page


def loguru(hms: str, level: str, msg: str) -> str:
    code = {"INFO": "\x1b[1m", "WARNING": "\x1b[33m\x1b[1m", "ERROR": "\x1b[31m\x1b[1m"}[level]
    return f"\x1b[2m{hms}\x1b[0m {code}{level:>7}\x1b[0m {code}\x1b[22m{msg}\x1b[0m\x1b[0m\n"


def panes(at) -> list[str]:
    return [h.proto.body for h in at.get("html") if "overflow:auto" in h.proto.body]


def shown_lines(body: str) -> list[str]:
    """The text of each line of a pane, tags removed and entities decoded."""
    import html

    return [html.unescape(re.sub(r"<[^>]+>", "", row)) for row in re.findall(r'<div style="white-space:pre-wrap[^"]*">(.*?)</div>', body)]


def live_run(parent, *, lines: int = 30):
    """A running prime-rl run (fresh metrics) with trainer, orchestrator and env logs."""
    now = time.time()
    run = make_rl_run(parent, "live--qwen--0123abcd", rows=[{"step": 0, "time": now, "producer": "trainer", "loss": 1.0}])
    att = run / "logs" / "attempt_1"
    hms = time.strftime("%H:%M:%S", time.localtime(now - 60))
    (att / "trainer.log").write_text("".join(loguru(hms, "INFO", f"trainer line {i}") for i in range(lines))
                                     + loguru(hms, "ERROR", "boom <script>alert(1)</script>"))
    (att / "orchestrator.log").write_text(loguru(hms, "INFO", "OPENAI_API_KEY=SECRET-6 uv run rl --token SECRET-7")
                                          + loguru(hms, "WARNING", "orchestrator slow"))
    (att / "envs" / "train").mkdir(parents=True)
    ymd = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now - 60))  # (a dated line: the run's day)
    (att / "envs" / "train" / "math.log").write_text(f"{ymd} INFO env up\n")
    return run


def test_merged_pane_interleaves_components_and_escapes_every_character(tmp_path, monkeypatch):
    run = live_run(tmp_path / "out")
    at = open_page(monkeypatch, tmp_path / "out", "pages/logs.py", {"run": run.name})
    assert at.multiselect(key="comp").value == ["trainer", "orchestrator", "envs"]
    [body] = panes(at)
    assert "<script" not in body and "&lt;script&gt;alert(1)&lt;/script&gt;" in body
    text = shown_lines(body)
    assert any("trainer line 0" in t for t in text) and any("orchestrator slow" in t for t in text)
    assert any("env up" in t for t in text)
    assert "\x1b" not in body and "color:#d1242f" in body  # the ERROR record in red, no raw escape
    assert "SECRET-" not in body and any("uv run rl" in t for t in text)  # secrets hidden, the line shown
    assert any("lines" in c.value and "trainer" in c.value for c in at.caption)


def test_url_picks_components_filter_and_level(tmp_path, monkeypatch):
    run = live_run(tmp_path / "out")
    at = open_page(monkeypatch, tmp_path / "out", "pages/logs.py",
                   {"run": run.name, "comp": "trainer", "filter": r"line 1\d", "level": "INFO"})
    [body] = panes(at)
    text = shown_lines(body)
    assert len(text) == 10 and all("trainer line 1" in t for t in text)
    at = open_page(monkeypatch, tmp_path / "out", "pages/logs.py", {"run": run.name, "level": "ERROR"})
    assert [t.split("ERROR ")[-1] for t in shown_lines(panes(at)[0])] == ["boom <script>alert(1)</script>"]
    at = open_page(monkeypatch, tmp_path / "out", "pages/logs.py", {"run": run.name, "filter": "(?=x)"})
    assert any("invalid regex" in e.value for e in at.error)


def test_split_panes_each_with_a_file_picker_and_maximize(tmp_path, monkeypatch):
    run = live_run(tmp_path / "out")
    at = open_page(monkeypatch, tmp_path / "out", "pages/logs.py", {"run": run.name, "mode": "split"})
    assert len(panes(at)) == 3
    assert at.selectbox(key="file_trainer").value.endswith("trainer.log")
    at.button(key="max_orchestrator").click().run()
    [body] = panes(at)
    assert [t.split(" ", 1)[-1] for t in shown_lines(body)][-1].endswith("orchestrator slow")
    at.button(key="max_orchestrator").click().run()
    assert len(panes(at)) == 3


def test_follow_shows_appended_lines_reading_only_them(tmp_path, monkeypatch):
    run = live_run(tmp_path / "out")
    at = open_page(monkeypatch, tmp_path / "out", "pages/logs.py", {"run": run.name})
    assert rd.open_run(run).overview().status == "running" and at.toggle(key="follow").value
    added = loguru(time.strftime("%H:%M:%S"), "INFO", "a brand new line")
    with open(run / "logs" / "attempt_1" / "trainer.log", "a") as fh:
        fh.write(added)
    with counted_reads() as read:
        at.run()
    assert read.bytes == 1 + len(added.encode())  # the byte before, then the appended bytes
    assert shown_lines(panes(at)[0])[-1].endswith("a brand new line")


def test_load_older_pages_back(tmp_path, monkeypatch):
    run = live_run(tmp_path / "out", lines=1200)
    os.utime(run / "logs" / "attempt_1" / "trainer.log", (time.time() - 3600,) * 2)
    at = open_page(monkeypatch, tmp_path / "out", "pages/logs.py", {"run": run.name, "comp": "trainer"})
    first = shown_lines(panes(at)[0])
    assert len(first) == 1000 and "trainer line 201" in first[0]
    at.button(key="logs_merged_older").click().run()
    text = shown_lines(panes(at)[0])
    assert len(text) == 1201 and "trainer line 0" in text[0] and text[-1000:] == first


def test_ray_actor_picker_on_a_verl_log(demo_runs, monkeypatch):
    folder, runs = demo_runs
    verl = runs[runs["kind"] == "verl"]["run_id"].iloc[0]
    at = open_page(monkeypatch, folder, "pages/logs.py", {"run": verl})
    assert at.multiselect(key="comp").value == ["console"]
    assert {"TaskRunner", "WorkerDict"} <= set(at.multiselect(key="actors").options)
    at.multiselect(key="actors").set_value(["TaskRunner"]).run()
    text = shown_lines(panes(at)[0])
    assert text and all("(TaskRunner pid=" in t for t in text)


def test_attempts_and_runs_without_logs(demo_runs, monkeypatch):
    folder, runs = demo_runs
    resumed = next(r for r, p in zip(runs["run_id"], runs["path"]) if rd.open_run(p).kind == "prime-rl"
                   and len(rd.open_run(p).attempts()) > 1)
    at = open_page(monkeypatch, folder, "pages/logs.py", {"run": resumed, "attempt": "1", "comp": "trainer"})
    assert at.selectbox(key="attempt").value == 1
    assert any("Training failed" in t or "OutOfMemory" in t for t in shown_lines(panes(at)[0]))
    relax = runs[runs["kind"] == "relax"]["run_id"].iloc[0]
    at = open_page(monkeypatch, folder, "pages/logs.py", {"run": relax})
    assert not panes(at) and any("no log files" in i.value for i in at.info)
