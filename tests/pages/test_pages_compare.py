"""The Compare page through AppTest on the built-in demo runs (every kind)."""
from __future__ import annotations

import json

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

import rundash_core as rd
from rundash_core.compare import config_diff, default_runs
from rundash_core.views.display_text import md_code, table_height

from helpers import open_page
from helpers.pages import charts_by_title, legend_lines


def compare_page(monkeypatch, folder, runs: list[str], **query) -> AppTest:
    first = {"run": runs[0], "runs": runs} if runs else {}
    return open_page(monkeypatch, folder, "pages/compare.py", {**first, **query})


def test_runs_of_every_kind_overlay_with_one_colour_per_run(monkeypatch, demo_runs):
    folder, runs = demo_runs
    ids = runs["run_id"].tolist()
    at = compare_page(monkeypatch, folder, ids)
    shown = charts_by_title(at)
    reward = legend_lines(shown["reward"])
    kinds = dict(zip(runs["run_id"], runs["kind"]))
    assert {kinds[r] for r in reward} == {"prime-rl", "verl", "swe-lego-rl", "relax"}
    colours = {name: t["line"]["color"] for name, t in reward.items()}
    assert len(set(colours.values())) == len(colours)
    for title in ("response length", "entropy"):
        for name, t in legend_lines(shown[title]).items():
            assert t["line"]["color"] == colours.get(name, t["line"]["color"]), (title, name)
    aliases = at.dataframe[0].value
    assert {"reward", "entropy", "KL", "grad norm", "response length", "throughput", "val score"} <= set(aliases["alias"])


def test_metric_table_matches_the_runs_metrics(monkeypatch, demo_runs):
    folder, runs = demo_runs
    verl = runs[runs["kind"] == "verl"].iloc[0]
    relax = runs[runs["kind"] == "relax"].iloc[0]
    at = compare_page(monkeypatch, folder, [verl["run_id"], relax["run_id"]], metrics=["reward"])
    table = [d.value for d in at.dataframe if "step_of_best" in d.value.columns][0]
    row = table[(table["run"] == verl["run_id"]) & (table["metric"] == "reward")].iloc[0]
    m = rd.open_run(verl["path"]).metrics()
    score = m[m["metric"] == "critic/score/mean"].sort_values("step")
    assert row["last"] == pytest.approx(score["value"].iloc[-1])
    assert row["max"] == pytest.approx(score["value"].max()) and row["min"] == pytest.approx(score["value"].min())
    assert row["step_of_best"] == score.loc[score["value"].idxmax(), "step"]
    assert set(table["run"]) == {verl["run_id"], relax["run_id"]}


def test_config_diff_and_group_by_a_config_key(monkeypatch, demo_runs):
    folder, runs = demo_runs
    prime = runs[(runs["kind"] == "prime-rl") & (runs["flavor"] == "rl")]
    ids = prime["run_id"].tolist()
    assert len(ids) == 3
    at = compare_page(monkeypatch, folder, ids)
    diff = [d.value for d in at.dataframe if d.value.index.name == "key"][0]
    configs = {r: rd.open_run(p).config() for r, p in zip(prime["run_id"], prime["path"])}
    assert list(diff.index) == list(config_diff(configs).index)
    assert "inference.parallel.dp" in diff.index and diff.loc["inference.parallel.dp"].tolist() == ["2", "2", "1"]
    full = config_diff(configs, differences_only=False)
    assert len(full) > len(diff)  # equal keys are hidden by "differences only"

    at = compare_page(monkeypatch, folder, ids, group="inference.parallel.dp", metrics=["reward"])
    band = [s for t, s in charts_by_title(at).items() if t == "reward" and any("(n=" in n for n in legend_lines(s))]
    assert band, list(charts_by_title(at))
    names = sorted(legend_lines(band[0]))
    assert names == ["1 (n=1)", "2 (n=2)"]
    downloads = at.get("download_button")
    assert len(downloads) == len(at.get("plotly_chart"))  # every chart, bands included, has its CSV


def test_the_page_opens_with_the_current_run_and_recent_runs_of_its_kind(monkeypatch, demo_runs):
    folder, runs = demo_runs
    prime = runs[runs["kind"] == "prime-rl"]
    current = prime["run_id"].iloc[-1]
    at = open_page(monkeypatch, folder, "pages/compare.py", {"run": current})  # no ?runs=: the default
    chosen = at.multiselect(key="runs").value
    assert chosen == default_runs(runs, current) and chosen[0] == current
    assert set(chosen) == set(prime["run_id"])  # the demo's four prime-rl runs (up to four others)
    assert not any("two or more runs" in i.value for i in at.info)
    assert set().union(*(legend_lines(spec) for spec in charts_by_title(at).values())) == set(chosen)  # (the SFT run has no reward)
    # the only run of its kind still gets a comparison: the most recent other run joins it
    relax = runs[runs["kind"] == "relax"]["run_id"].iloc[0]
    at = open_page(monkeypatch, folder, "pages/compare.py", {"run": relax})
    assert len(at.multiselect(key="runs").value) == 2 and at.get("plotly_chart")


def test_run_name_filter_keeps_the_chosen_runs_visible(monkeypatch, demo_runs):
    folder, runs = demo_runs
    verl = runs[runs["kind"] == "verl"]["run_id"].iloc[0]
    relax = runs[runs["kind"] == "relax"]["run_id"].iloc[0]
    at = compare_page(monkeypatch, folder, [verl, relax], match="qwen3-0\\.6b")
    picker = at.multiselect(key="runs")
    assert picker.value == [verl, relax]  # chosen runs the regex does not match stay chosen and listed
    matching = [r for r in runs["run_id"] if "qwen3-0.6b" in r]
    assert matching and set(picker.options) == set(matching) | {verl, relax} | set(default_runs(runs, verl))
    assert len(legend_lines(charts_by_title(at)["reward"])) == 2

    at = compare_page(monkeypatch, folder, [verl])
    assert any("two or more runs" in i.value for i in at.info)
    assert not at.get("plotly_chart")


def test_unreadable_configs_are_named_not_called_identical(monkeypatch, demo_runs):
    """A PPO and a GRPO run whose configs cannot be read used to give "The configs are identical."."""
    from rundash_core.sources.verl.run import VerlRun

    def broken(self):
        raise OSError("config went away")

    monkeypatch.setattr(VerlRun, "config", broken)  # verl and SWE-Lego-RL (a verl log) runs
    folder, runs = demo_runs
    ids = runs[runs["kind"].isin(["verl", "swe-lego-rl"])]["run_id"].tolist()
    assert len(ids) == 2
    at = compare_page(monkeypatch, folder, ids)
    texts = [c.value for c in at.caption] + [w.value for w in at.warning]
    assert not any("identical" in t for t in texts)
    assert any("No config could be read" in w.value and all(md_code(r) in w.value for r in ids) for w in at.warning)
    assert any("nothing to compare" in c.value for c in at.caption)
    assert not [d for d in at.dataframe if d.value.index.name == "key"]

    prime = runs[(runs["kind"] == "prime-rl") & (runs["flavor"] == "rl")]["run_id"].tolist()[:2]
    at = compare_page(monkeypatch, folder, [*prime, ids[0]])
    diff = [d.value for d in at.dataframe if d.value.index.name == "key"][0]
    assert list(diff.columns) == prime  # the unreadable run takes no part in the diff...
    assert any(md_code(ids[0]) in w.value for w in at.warning)  # ...and is named


def test_metric_table_says_only_what_it_knows(monkeypatch, demo_runs, tables):
    """Entropy has no better direction: no best (it used to be its maximum); absent cells read —."""
    calls = tables
    folder, runs = demo_runs
    ids = runs[runs["kind"] == "prime-rl"]["run_id"].tolist()[:2]
    at = compare_page(monkeypatch, folder, ids, metrics=["reward", "entropy"])
    table = [d.value for d in at.dataframe if "step_of_best" in d.value.columns][0]
    entropy = table[table["metric"] == "entropy"]
    reward = table[table["metric"] == "reward"]
    assert len(entropy) == 2 and entropy["best"].isna().all() and entropy["step_of_best"].isna().all()
    assert (reward["best"] == reward["max"]).all() and (reward["better"] == "↑").all()
    data, kw = next((d, kw) for d, kw in calls if isinstance(d, pd.DataFrame) and "step_of_best" in d.columns)
    assert kw["placeholder"] == "—" and kw["height"] == table_height(len(table))
    for d, kw in calls:  # every table of the page: absent values as —, never "None" / "nan" text
        assert kw.get("placeholder") == "—"
        cells = d.reset_index().astype(object) if isinstance(d, pd.DataFrame) else pd.DataFrame()
        assert not cells.isin(["None", "nan", "NaN", "<NA>"]).any().any()


def test_time_alignment_names_the_runs_whose_time_is_estimated(monkeypatch, demo_runs):
    folder, runs = demo_runs
    verl = runs[runs["kind"] == "verl"].iloc[0]["run_id"]
    prime = runs[runs["kind"] == "prime-rl"].iloc[0]["run_id"]
    at = compare_page(monkeypatch, folder, [prime, verl], align="time", metrics=["reward"])
    assert any(c.value.startswith("Estimated wall time") and md_code(verl) in c.value
               and md_code(prime) not in c.value for c in at.caption)
    assert not any("No timestamps" in c.value for c in at.caption)
    reward = legend_lines(charts_by_title(at)["reward"])
    assert list(reward) == [prime, verl]  # the verl run is placed by its step durations, not dropped
    assert charts_by_title(at)["reward"]["layout"]["xaxis"]["title"]["text"].startswith("time since start")


def test_config_diff_never_shows_secrets(monkeypatch, tmp_path):
    import shutil

    from helpers import DATA

    out = tmp_path / "outputs"
    secret = "sk-THISISASECRETVALUE123456"
    ids = []
    for i, key in enumerate(["sk-OTHERSECRETVALUE98765432", secret]):
        run = out / f"secret-run-{i}--qwen3-0.6b--5ec2e70{i}"
        shutil.copytree(DATA / "prime-rl-old" / "reverse-text--qwen3-0.6b--a7be3ee1", run, symlinks=True)
        cfg = run / "configs" / "orchestrator.json"
        data = json.loads(cfg.read_text())
        data["client"] = {"api_key": key, "base_url": f"http://host-{i}"}
        cfg.write_text(json.dumps(data))
        ids.append(run.name)
    at = compare_page(monkeypatch, out, ids)
    diff = [d.value for d in at.dataframe if d.value.index.name == "key"][0]
    shown = diff.to_string()
    assert "base_url" in shown and secret not in shown and "OTHERSECRET" not in shown
    assert not any(k.endswith("api_key") for k in diff.index)  # both hidden: equal, not a difference
    assert all(secret not in str(o) for o in at.selectbox(key="group").options)


def _left_out(at: AppTest) -> list[str]:
    return [w.value for w in at.warning if w.value.startswith("left out: ")]


def test_a_run_that_cannot_be_read_is_left_out_and_the_others_compare(monkeypatch, tmp_path):
    """Real bad files, no patched reader: a verl log whose name is not UTF-8 (b"bad\\xff.log") sits
    among good ones. Choosing it in the sidebar names it there, no error page; Compare from a
    good run shows the good runs' charts, names the one it left out and why, raises nothing."""
    import os
    import shutil

    from helpers import DATA, open_page

    folder = tmp_path / "verl"
    folder.mkdir()
    for name in ("dq_math.log", "eh_gemma-2-2b-it-sft-0.411.log"):
        shutil.copy(DATA / "verl" / name, folder / name)
    bad = os.path.join(os.fsencode(folder), b"bad\xff.log")
    shutil.copy(DATA / "verl" / "eh_Qwen2.5-0.5B-bsz256_2-prompt1024-resp512-0.567.log", bad)
    ids = rd.discover([folder])["run_id"].tolist()
    [bad_id] = [r for r in ids if r.startswith("bad")]
    good = [r for r in ids if r != bad_id]

    at = open_page(monkeypatch, folder, "pages/compare.py", {"run": bad_id})  # asserts no exception element
    assert not at.exception
    at = compare_page(monkeypatch, folder, [good[0], *[r for r in ids if r != good[0]]])
    assert not at.exception
    shown = {name for spec in charts_by_title(at).values() for name in legend_lines(spec)}
    assert set(good) <= shown
    notes = _left_out(at)
    if bad_id in shown:  # logs() reads such a name: the run simply compares
        assert notes == []
    else:  # it cannot be read: it is named with why, not silently dropped
        [note] = notes
        assert note.startswith(f"left out: {md_code(bad_id)}: ") and "Error" in note


def test_a_run_swapped_out_of_the_roots_after_the_runs_list_is_left_out(monkeypatch, tmp_path):
    """A run dir replaced by a link out of the allowed roots between the runs list (cached a few
    seconds) and Compare: opening it is refused for real (RunError), so it is left out and named
    with why; the other runs compare and nothing raises."""
    import os
    import shutil

    from helpers import NEW_RUN, copy_run

    folder = tmp_path / "outputs"
    runs = [copy_run(NEW_RUN, folder, name) for name in ("a", "b", "c")]
    at = open_page(monkeypatch, folder, "pages/overview.py", {"run": "a"})  # the runs list holds c
    elsewhere = copy_run(NEW_RUN, tmp_path / "elsewhere", "c")
    shutil.rmtree(runs[2])
    os.symlink(elsewhere, runs[2])
    at.query_params["runs"] = ["a", "b", "c"]
    at.switch_page("pages/compare.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert {"a", "b"} <= set(legend_lines(charts_by_title(at)["reward"]))
    assert "c" not in legend_lines(charts_by_title(at)["reward"])
    [note] = _left_out(at)
    assert note.startswith("left out: `c`: RunError") and "roots" in note
    at.sidebar.selectbox(key="sidebar_run").set_value("c").run()  # chosen in the sidebar: named there, no error page
    assert not at.exception, [e.value for e in at.exception]
    assert any(e.value.startswith("Run `c` cannot be opened: RunError") for e in at.sidebar.error)
