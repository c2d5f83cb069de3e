"""Pages through Streamlit's AppTest: the real app.py, real pages, real run directories."""
from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import rundash_core as rd
from rundash_core import cache
from rundash_core.views.config_search import compile_search, prune
from rundash_core.views.display_text import format_time, md_escape

from helpers import DATA, REPO, app_pages, open_page

ROOT = REPO
PAGES = app_pages()


@pytest.fixture
def runs_dir(tmp_path) -> Path:
    """A tracked folder with both sample prime-rl runs (current and legacy layout)."""
    out = tmp_path / "outputs"
    out.mkdir()
    for sub in ("prime-rl", "prime-rl-old"):
        for run in (DATA / sub).iterdir():
            shutil.copytree(run, out / run.name, symlinks=True)
    old = 1_790_000_000.0  # long finished: statuses must not depend on when the repo was cloned
    for dirpath, dirnames, filenames in os.walk(out):
        for name in dirnames + filenames:
            os.utime(os.path.join(dirpath, name), (old, old), follow_symlinks=False)
    return out


def make_app(monkeypatch, dirs: list[Path], query: dict | None = None) -> AppTest:
    monkeypatch.setenv("RUNDASH_DIRS", os.pathsep.join(str(d) for d in dirs))
    monkeypatch.delenv("RUNDASH_ROOTS", raising=False)
    cache.shared.clear()
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    for k, v in (query or {}).items():
        at.query_params[k] = v
    return at


def card_of(at: AppTest) -> dict[str, str]:
    """Run-card fields: each is a caption (label) followed by a markdown value."""
    blocks = [c for c in at.main.columns]
    out = {}
    for col in blocks:
        caps = [c.value for c in col.caption]
        mds = [m.value for m in col.markdown]
        if caps and mds:
            out[caps[0]] = mds[0].strip("*")
    return out


def test_overview_lists_runs_and_shows_the_run_card(monkeypatch, runs_dir):
    at = make_app(monkeypatch, [runs_dir])
    at.run()
    assert not at.exception
    runs = rd.discover([runs_dir])
    assert [o.split(" · ")[0] for o in at.sidebar.selectbox[0].options] == runs["run_id"].tolist()
    assert len(at.sidebar.selectbox[0].options) == len(runs) == 2
    assert at.dataframe[0].value["run_id"].tolist() == runs["run_id"].tolist()
    selected = at.query_params["run"]
    assert selected in runs["run_id"].tolist()
    ov = rd.open_run(runs.set_index("run_id").loc[selected, "path"]).overview()
    shown = card_of(at)
    assert ov.status in shown["STATUS"]
    assert shown["MODEL"] == md_escape(ov.model)
    assert shown["RESUMES"] == str(ov.attempts - 1)
    assert shown["CREATED"] == md_escape(format_time(ov.created))
    assert shown["TRAIN ENVS"] == md_escape(", ".join(ov.train_envs))
    assert any(f"step {ov.step}" in md.value for md in at.markdown)


def test_run_query_param_selects_the_run_on_a_fresh_session(monkeypatch, runs_dir):
    runs = rd.discover([runs_dir])
    for run_id in runs["run_id"]:
        at = make_app(monkeypatch, [runs_dir], {"run": run_id})
        at.run()
        assert not at.exception
        assert at.sidebar.selectbox[0].value == run_id
        ov = rd.open_run(runs.set_index("run_id").loc[run_id, "path"]).overview()
        assert card_of(at)["MODEL"] == md_escape(ov.model)
        assert at.query_params["run"] == run_id


def test_unknown_run_param_warns_and_falls_back(monkeypatch, runs_dir):
    at = make_app(monkeypatch, [runs_dir], {"run": "no-such-run"})
    at.run()
    assert not at.exception
    assert any("not in the tracked directories" in w.value for w in at.sidebar.warning)
    assert at.query_params["run"] != "no-such-run"


def test_sidebar_selection_updates_url_and_card(monkeypatch, runs_dir):
    at = make_app(monkeypatch, [runs_dir])
    at.run()
    other = [r for r in rd.discover([runs_dir])["run_id"] if r != at.sidebar.selectbox[0].value][0]
    at.sidebar.selectbox[0].set_value(other).run()
    assert not at.exception
    assert at.query_params["run"] == other
    ov = rd.open_run(runs_dir / other).overview()
    assert card_of(at)["MODEL"] == md_escape(ov.model)


def test_overview_filters(monkeypatch, runs_dir):
    at = make_app(monkeypatch, [runs_dir])
    at.run()
    at.text_input(key="f_name").input("reverse").run()
    assert at.dataframe[0].value["run_id"].tolist() == ["reverse-text--qwen3-0.6b--a7be3ee1"]
    at.text_input(key="f_name").input("([").run()
    assert not at.exception
    assert any("invalid regex" in e.value for e in at.error)
    at.text_input(key="f_name").input("").run()
    at.multiselect(key="f_status").select("running").run()
    assert not at.dataframe or at.dataframe[0].value.empty
    assert any("No runs match" in i.value for i in at.info)
    at.multiselect(key="f_status").unselect("running").select("completed").run()
    want = rd.discover([runs_dir]).query("status == 'completed'")["run_id"].tolist()
    assert want and at.dataframe[0].value["run_id"].tolist() == want


def test_config_page_attempts_and_search(monkeypatch, runs_dir):
    run_id = "math-python+wiki-search--qwen3-4b--0b45f1ec"
    at = make_app(monkeypatch, [runs_dir], {"run": run_id})
    at.run()
    at.switch_page("pages/config.py").run()
    assert not at.exception
    run = rd.open_run(runs_dir / run_id)
    assert [e.label for e in at.expander if e.label != "Directories"] == [md_escape(n) for n in run.configs()]
    assert at.selectbox(key="cfg_attempt").format_func(None) == f"latest (attempt {run.latest_attempt()})"
    command = [c.value for c in at.code if c.value.startswith("uv run")]
    assert command and "--resume" in command[0]

    at.selectbox(key="cfg_attempt").set_value(1).run()
    command = [c.value for c in at.code if c.value.startswith("uv run")]
    assert command and "--resume" not in command[0]

    at.text_input(key="cfg_search").input("max_steps").run()
    pattern, _ = compile_search("max_steps")
    files = run.configs(attempt=1)
    expected = sum(prune(v, pattern)[1] for v in files.values() if isinstance(v, dict))
    expected += sum(v.count("max_steps") for v in files.values() if isinstance(v, str))
    assert any(f"**{expected}** match" in c.value for c in at.caption)  # (after the run card's captions)
    shown = [e.label for e in at.expander if e.label != "Directories"]
    assert shown and all("match" in s for s in shown)
    assert all("max_steps" in c.value for c in at.code if c.language == "json")

    at.text_input(key="cfg_search").input("(").run()
    assert any("invalid regex" in e.value for e in at.error)


def test_pages_never_write_inside_run_dirs(monkeypatch, runs_dir):
    def snapshot():
        out = {}
        for dirpath, dirnames, filenames in os.walk(runs_dir):
            for name in dirnames + filenames:
                p = os.path.join(dirpath, name)
                st = os.lstat(p)
                out[p] = (st.st_size, st.st_mtime_ns, stat.S_IMODE(st.st_mode))
        return out

    for dirpath, _dirnames, filenames in os.walk(runs_dir):
        for name in filenames:
            os.chmod(os.path.join(dirpath, name), 0o444)
        os.chmod(dirpath, 0o555)
    before = snapshot()
    try:
        for run_id in rd.discover([runs_dir])["run_id"]:
            for page in PAGES:
                at = make_app(monkeypatch, [runs_dir], {"run": run_id})
                at.run()
                at.switch_page(page).run()
                assert not at.exception, (run_id, page)
        assert snapshot() == before
    finally:
        for dirpath, _dirnames, _filenames in os.walk(runs_dir):
            os.chmod(dirpath, 0o755)


def test_bad_run_shows_problems_not_tracebacks(monkeypatch, tmp_path):
    out = tmp_path / "outputs"
    run = out / "broken--qwen3-4b--deadbeef"
    (run / "monitors" / "file").mkdir(parents=True)
    (run / "configs" / "attempt_1" / "resolved").mkdir(parents=True)
    (run / "configs" / "attempt_1" / "resolved" / "orchestrator.json").write_text("{not json")
    (run / "monitors" / "file" / "metrics.jsonl").write_bytes(
        b'{"step": 1, "time": 1.0, "a": 1.0, "producer": "trainer"}\n'
        b'\xff\xfe garbage \x00\n'
        b'{"step": 2, "time": 2.0, "a": NaN, "producer": "trainer"}\n'
        b'{"step": 3, "time": 3.0, "a": 3.0, "prod')
    at = make_app(monkeypatch, [out])
    at.run()
    assert not at.exception
    # AppTest drops the entrypoint's sidebar after switch_page, so read it on the home page.
    problems = " ".join(c.value for c in at.sidebar.code)
    assert "metrics.jsonl" in problems and "orchestrator.json" in problems
    assert "invalid JSON" in problems and "not JSON" in problems
    assert "first at line 2" in problems
    for page in PAGES:
        at.switch_page(page).run()
        assert not at.exception


def test_added_directories_are_checked_against_the_roots(monkeypatch, runs_dir, tmp_path):
    # AppTest drops the entrypoint's widgets after the first run (st.navigation), so the add form
    # itself is driven in the browser test; here the session's added dirs are seeded directly and
    # the effect is read from the Overview table.
    other = tmp_path / "other"
    shutil.copytree(DATA / "prime-rl-old" / "reverse-text--qwen3-0.6b--a7be3ee1",
                    other / "extra-run--qwen3-0.6b--0000beef", symlinks=True)
    at = make_app(monkeypatch, [runs_dir])
    at.session_state["extra_dirs"] = [str(other)]
    at.run()
    assert not at.exception
    before = rd.discover([runs_dir])["run_id"].tolist()
    assert at.dataframe[0].value["run_id"].tolist() == before

    monkeypatch.setenv("RUNDASH_ROOTS", str(tmp_path))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.session_state["extra_dirs"] = [str(other)]
    at.run()
    assert not at.exception
    assert sorted(at.dataframe[0].value["run_id"]) == sorted(before + ["extra-run--qwen3-0.6b--0000beef"])


def test_run_name_with_markup_is_shown_as_text(monkeypatch, tmp_path):
    out = tmp_path / "outputs"
    name = "<img src=x onerror=alert(1)>**bold**[link](javascript:alert(2))"
    shutil.copytree(DATA / "prime-rl-old" / "reverse-text--qwen3-0.6b--a7be3ee1", out / name, symlinks=True)
    at = make_app(monkeypatch, [out])
    at.run()
    assert not at.exception
    caption = [c.value for c in at.caption if "prime-rl" in c.value][0]
    assert "<img" not in caption.replace("\\<img", "")
    assert "\\*\\*bold\\*\\*" in caption and "\\[link\\]" in caption


def test_config_page_never_shows_secrets(monkeypatch, tmp_path):
    out = tmp_path / "outputs"
    run = out / "secret-run--qwen3-0.6b--5ec2e700"
    shutil.copytree(DATA / "prime-rl-old" / "reverse-text--qwen3-0.6b--a7be3ee1", run, symlinks=True)
    secret = "sk-THISISASECRETVALUE123456"
    cfg = run / "configs" / "orchestrator.json"
    data = json.loads(cfg.read_text())
    data["client"] = {"api_key": secret, "base_url": "http://x"}
    cfg.write_text(json.dumps(data))
    at = make_app(monkeypatch, [out])
    at.run()
    at.switch_page("pages/config.py").run()
    assert not at.exception
    shown = " ".join(c.value for c in at.code)
    assert "base_url" in shown and "[hidden]" in shown and secret not in shown
    at.text_input(key="cfg_search").input("THISISASECRET").run()
    assert secret not in " ".join(c.value for c in at.code)


def test_every_page_renders_every_kind_of_demo_run(monkeypatch, tmp_path):
    from rundash_core import demo

    folder = demo.ensure_demo(tmp_path / "demo")
    runs = rd.discover([folder])
    assert {"prime-rl", "verl", "swe-lego-rl", "relax"} <= set(runs["kind"])
    for run_id, path in zip(runs["run_id"], runs["path"]):
        at = make_app(monkeypatch, [folder], {"run": run_id})
        at.run()
        assert not at.exception, run_id
        ov = rd.open_run(path).overview()
        assert card_of(at)["MODEL"] == md_escape(ov.model or "n/a"), run_id
        for page in PAGES[1:]:
            at.switch_page(page).run()
            assert not at.exception, (run_id, page)


def test_the_run_card_is_on_every_page(monkeypatch, demo_runs):
    """The prime-rl seed's card (step N of max, status, duration, model, resumes, envs, created)
    at the top of every page, compact away from Overview."""
    folder, runs = demo_runs
    row = runs[runs["kind"] == "prime-rl"].iloc[0]
    ov = rd.open_run(row["path"], run_id=row["run_id"]).overview()
    for page in PAGES:
        at = open_page(monkeypatch, folder, page, {"run": row["run_id"]})
        headline = [m.value for m in at.markdown if "of" in m.value and m.value.startswith("#")]
        assert headline and f"step {ov.step} of {ov.max_steps}" in headline[0], page
        labels = [c.value for c in at.caption]
        assert {"STATUS", "DURATION", "MODEL", "RESUMES", "CREATED"} <= set(labels), page
