"""Episodes by the writer's own ids (issue 23): `samples()` carries `episode_id` (prime-rl's episode
`id`, Relax's sample index, the Harbor trial name, a verl dump's `id`), `run.episode()` opens a
sample by it or by its short `sample_id`, an id several samples share (or none) is a KeyError
naming the run and the id, and the Trajectory page's deep links carry the writer id."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import rundash_core as rd
from rundash_core import episode_ids, frames

from helpers import DATA, open_page

TRACES_RUN = DATA / "prime-rl-traces" / "math-python+wiki-search--qwen3-4b--0b45f1ec"
LEGO_LOG = DATA / "lego" / "logs" / "qwen3-8b-swegym-gspo-async-r1.log"
RELAX_RUN = DATA / "relax" / "relax-run"
EVAL_RUN = DATA / "verifiers-eval" / "gsm8k--qwen3-4b--eval-5e1f0a2b"
PAGE = "pages/trajectory.py"


def _index_ids(run: Path) -> list[str]:
    """The episode ids of the stream index, read with json.loads (not rundash's reader)."""
    lines = (run / "monitors/file/traces/stream.index.jsonl").read_text().splitlines()
    return [json.loads(line)["id"] for line in lines if line.strip()]


def test_prime_rl_stream_lists_and_opens_the_episode_id():
    run = rd.open_run(TRACES_RUN)
    samples = run.samples()
    assert samples["episode_id"].tolist() == _index_ids(TRACES_RUN)
    row = samples.iloc[len(samples) // 2]
    full, short = row["episode_id"], row["sample_id"]
    assert len(full) == 32 and short.endswith(full[:8]) and short != full
    by_full, by_short = run.episode(full), run.episode(short)
    assert by_full.sample_id == by_short.sample_id == short  # the listed id, whichever was asked for
    assert by_full.ids["episode"] == full
    assert [m.content for m in by_full.messages] == [m.content for m in by_short.messages]


def test_unknown_id_is_a_key_error_naming_run_and_id():
    run = rd.open_run(TRACES_RUN)
    with pytest.raises(KeyError) as e:
        run.episode("9d4a62e8d012438482574dccfa5b9239")
    assert run.run_id in str(e.value) and "9d4a62e8d012438482574dccfa5b9239" in str(e.value)


def test_verifiers_eval_opens_by_episode_id():
    run = rd.open_run(EVAL_RUN)
    samples = run.samples()
    want = [json.loads(line)["id"] for line in (EVAL_RUN / "traces.jsonl").read_text().splitlines(keepends=True)
            if line.endswith("\n")]  # (the last line is torn: not listed)
    assert samples["episode_id"].tolist() == want
    assert run.episode(want[-1]).sample_id == samples["sample_id"].iloc[-1]


def test_relax_sample_index_is_listed_and_shared_ones_are_ambiguous(tmp_path):
    run = rd.open_run(RELAX_RUN)
    samples = run.samples()
    first = RELAX_RUN / "rollout_result" / "train" / "0.jsonl"
    indexes = [str(json.loads(line)["sample_index"]) for line in first.read_text().splitlines() if line.strip()]
    assert samples[samples["sample_id"].str.startswith("train-0-")]["episode_id"].tolist() == indexes
    with pytest.raises(KeyError) as e:  # every step has a sample 0
        run.episode("0")
    assert run.run_id in str(e.value) and "'0'" in str(e.value) and "train-0-0" in str(e.value)
    assert episode_ids.link_ids(samples).tolist() == samples["sample_id"].tolist()  # links: the short form
    # one file: each sample index names one sample, and opens it
    (tmp_path / "one" / "rollout_result" / "train").mkdir(parents=True)
    shutil.copy(first, tmp_path / "one" / "rollout_result" / "train" / "0.jsonl")
    one = rd.open_run(tmp_path / "one")
    ep = one.episode(indexes[3])
    assert ep.sample_id == f"train-0-{indexes[3]}" and ep.ids["sample_index"] == indexes[3]


def test_harbor_trial_name_is_the_episode_id():
    run = rd.open_run(LEGO_LOG)
    samples = run.samples()
    assert samples["episode_id"].tolist() == [Path(p).name for p in samples["locator"]]
    row = samples.iloc[-1]
    ep = run.episode(row["episode_id"])
    assert ep.sample_id == row["sample_id"] and ep.ids["trial"] == row["episode_id"]
    assert episode_ids.link_ids(samples).tolist() == samples["episode_id"].tolist()


def test_verl_dump_id_when_the_dump_has_one(tmp_path):
    src = DATA / "verl-dumps"
    shutil.copy(src / "grpo-dumps.log", tmp_path / "grpo-dumps.log")
    shutil.copytree(src / "generations", tmp_path / "generations")
    plain = rd.open_run(tmp_path / "grpo-dumps.log").samples()
    assert plain["episode_id"].isna().all()  # the brief format has no id
    dump = tmp_path / "generations" / "rollout" / "1.jsonl"
    rows = [json.loads(line) for line in dump.read_text().splitlines() if line.strip()]
    dump.write_text("".join(json.dumps({**r, "id": f"gen-{k}"}) + "\n" for k, r in enumerate(rows)))
    run = rd.open_run(tmp_path / "grpo-dumps.log")
    samples = run.samples()
    assert samples[samples["step"] == 1]["episode_id"].tolist() == [f"gen-{k}" for k in range(len(rows))]
    assert samples[samples["step"] != 1]["episode_id"].isna().all()
    ep = run.episode("gen-2")
    assert ep.sample_id == "t1-2" and ep.messages[1].content == rows[2]["output"]
    assert run.episode("t1-2").messages[1].content == rows[2]["output"]


def test_every_kind_lists_the_column(demo_runs):
    _folder, runs = demo_runs
    for _, r in runs.iterrows():
        run = rd.open_run(r["path"], run_id=r["run_id"])
        samples = run.samples()
        assert frames.check(samples, frames.SAMPLES) == [], r["run_id"]
        links = episode_ids.link_ids(samples)
        assert links.is_unique, r["run_id"]
        for link in links.iloc[:: max(1, len(links) // 3)]:
            assert run.episode(link).sample_id in set(samples["sample_id"])


def test_deep_links_carry_the_writer_id_and_old_links_open(monkeypatch):
    runs = rd.discover([TRACES_RUN.parent])
    run_id = runs[runs["path"] == str(TRACES_RUN)]["run_id"].iloc[0]
    samples = rd.open_run(TRACES_RUN).samples()
    row = samples.iloc[5]
    at = open_page(monkeypatch, TRACES_RUN.parent, PAGE, {"run": run_id, "sample": row["episode_id"]})
    assert any(f"### Sample `{row['sample_id']}`" in m.value for m in at.markdown)  # opened by the full id
    at.button(key="tr_next_sample").click().run()  # newest first: the next row of the table
    shown = [d.value for d in at.dataframe if "sample_id" in getattr(d.value, "columns", [])][0]
    k = shown["sample_id"].tolist().index(row["sample_id"])
    assert at.query_params["sample"] == shown["episode_id"].iloc[k + 1]  # the link: the writer's id
    old = open_page(monkeypatch, TRACES_RUN.parent, PAGE, {"run": run_id, "sample": row["sample_id"]})  # a short-form link
    assert any(f"### Sample `{row['sample_id']}`" in m.value for m in old.markdown)
    assert not any("has no sample" in w.value for w in old.warning)


def test_a_report_citing_the_writer_id_links_to_the_episode():
    from rundash_core.views import reports

    run = rd.open_run(TRACES_RUN)
    samples = run.samples()
    full, short = samples["episode_id"].iloc[3], samples["sample_id"].iloc[3]
    cited = reports.episode_ids(samples)
    assert {full, short} <= cited
    body = reports.safe_markdown(f"Episode {full} looped; see also {short}.", run_id=run.run_id, sample_ids=cited)
    assert f"[{full}](" in body and f"sample={full}" in body and f"[{short}](" in body
    assert run.episode(full).sample_id == short  # the link opens it


def test_links_keep_the_short_form_for_an_id_a_url_would_escape():
    samples = frames.typed({"sample_id": ["1-aa", "2-bb", "3-cc", "4-dd"],
                            "episode_id": ["a/b c", "x" * (episode_ids.LINK_CHARS + 1), "ok-id", "1-aa"]}, frames.SAMPLES)
    assert episode_ids.link_ids(samples).tolist() == ["1-aa", "2-bb", "ok-id", "4-dd"]
    assert [episode_ids.link_id(samples, s) for s in samples["sample_id"]] == ["1-aa", "2-bb", "ok-id", "4-dd"]
    assert samples["sample_id"].iloc[episode_ids.find(samples, "a/b c", "r")] == "1-aa"  # still opens by it
    assert episode_ids.find(samples, "1-aa", "r") == 0  # a sample id wins over a writer id equal to it


def test_failure_mode_links_carry_the_trial_name_and_open_that_episode(monkeypatch):
    """Validation's failure-bucket table links each task to its trajectory by the writer's id (the
    Harbor trial name, as every deep link: `episode_ids.link_ids`), and that link opens the episode."""
    import urllib.parse

    folder = LEGO_LOG.parent.parent
    run_id = rd.discover([folder])["run_id"].iloc[0]
    at = open_page(monkeypatch, folder, "pages/validation.py", {"run": run_id})
    tables = [d.value for d in at.dataframe if "trajectory" in getattr(d.value, "columns", [])]
    assert tables and len(tables[0])
    samples = rd.open_run(LEGO_LOG).samples()
    for link in tables[0]["trajectory"]:
        sample = urllib.parse.parse_qs(urllib.parse.urlsplit(link).query)["sample"][0]
        assert sample in set(samples["episode_id"]) and sample not in set(samples["sample_id"]), link
    sample = urllib.parse.parse_qs(urllib.parse.urlsplit(tables[0]["trajectory"].iloc[0]).query)["sample"][0]
    opened = open_page(monkeypatch, folder, PAGE, {"run": run_id, "sample": sample})
    sid = samples.loc[samples["episode_id"] == sample, "sample_id"].iloc[0]
    assert any(f"### Sample `{sid}`" in m.value for m in opened.markdown)


def test_the_sample_table_shows_values_first_and_the_episode_id_first_of_the_ids():
    from rundash_core.views import trajectory as tj

    columns = tj.table_columns(rd.open_run(TRACES_RUN).samples().columns)
    assert columns[:3] == ["reward", "advantage", "status"]
    assert columns[-4:] == ["episode_id", "task_id", "group_id", "sample_id"]  # the ids last, the writer's first
    assert len(columns) == len(set(columns)) == len(rd.open_run(TRACES_RUN).samples().columns)


def test_the_trajectory_page_orders_its_table_by_table_columns(monkeypatch):
    from rundash_core.views import trajectory as tj

    runs = rd.discover([TRACES_RUN.parent])
    run_id = runs[runs["path"] == str(TRACES_RUN)]["run_id"].iloc[0]
    at = open_page(monkeypatch, TRACES_RUN.parent, PAGE, {"run": run_id})
    shown = [d.value for d in at.dataframe if "sample_id" in getattr(d.value, "columns", [])][0]
    assert list(shown.columns) == tj.table_columns(rd.open_run(TRACES_RUN).samples().columns)
