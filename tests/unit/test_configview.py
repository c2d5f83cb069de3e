"""Config search (prune/highlight counts), the runs-table filter, and added-directory checks."""
from __future__ import annotations

import json
import os

import pytest

import rundash_core as rd
from rundash_core.settings import allowed_roots, check_added_dir, startup_dirs
from rundash_core.views.config_search import MISSING, compile_search, filter_text, language_for, prune, render, search_config
from rundash_core.views.runs_table import filter_runs

from helpers import NEW_RUN, OLD_RUN, copy_run
from helpers.hostile import BIG_LINE

CFG = {
    "model": {"name": "Qwen/Qwen3-4B", "dtype": "bfloat16", "lora": {"rank": 8}},
    "optim": {"lr": 1e-6, "betas": [0.9, 0.999]},
    "train": {"source": [{"name": "math-python", "env": {"id": "math-python"}},
                         {"name": "wiki-search", "env": {"id": "wiki-search"}}]},
    "max_steps": 10,
    "seed": None,
}


def rx(text):
    pattern, err = compile_search(text)
    assert err is None
    return pattern


# compile_search -----------------------------------------------------------------------------------
def test_compile_search_empty_valid_invalid():
    assert compile_search("") == (None, None)
    pattern, err = compile_search("MODEL")
    assert err is None and pattern.search("model.name")  # case-insensitive
    pattern, err = compile_search("model[")
    assert pattern is None and err.startswith("invalid regex")
    pattern, err = compile_search("(unclosed")
    assert pattern is None and "invalid regex" in err


# prune --------------------------------------------------------------------------------------------
def test_matching_key_keeps_its_whole_value():
    pruned, hits = prune(CFG, rx("^model$"))
    assert pruned == {"model": CFG["model"]}  # dtype and lora kept although they do not match
    assert hits == 1


def test_non_matching_siblings_pruned_at_every_level():
    pruned, hits = prune(CFG, rx("rank"))
    assert pruned == {"model": {"lora": {"rank": 8}}}
    assert hits == 1


def test_hits_count_keys_and_scalars_in_what_is_kept():
    # "name" keys x3 (model.name, two sources' name), plus nothing else contains "name"
    pruned, hits = prune(CFG, rx("name"))
    assert pruned == {"model": {"name": "Qwen/Qwen3-4B"},
                      "train": {"source": [{"name": "math-python"}, {"name": "wiki-search"}]}}
    assert hits == 3
    # "math": the name value and the env id value in the first source
    pruned, hits = prune(CFG, rx("math"))
    assert pruned == {"train": {"source": [{"name": "math-python", "env": {"id": "math-python"}}]}}
    assert hits == 2
    # a key match counts itself plus matches inside its kept value: "source" key + nothing inside
    pruned, hits = prune(CFG, rx("source|wiki"))
    assert pruned == {"train": {"source": CFG["train"]["source"]}}
    assert hits == 1 + 2  # the key, then "wiki-search" as name and as id


def test_lists_keep_only_matching_items():
    pruned, hits = prune({"betas": [0.9, 0.999, 0.5]}, rx(r"^0\.9"))
    assert pruned == {"betas": [0.9, 0.999]} and hits == 2
    pruned, hits = prune([{"a": 1}, {"b": 2}, "b-string"], rx("b"))
    assert pruned == [{"b": 2}, "b-string"] and hits == 2


def test_scalars_numbers_none_and_no_match():
    assert prune(CFG, rx("bfloat"))[0] == {"model": {"dtype": "bfloat16"}}
    assert prune(CFG, rx("^10$")) == ({"max_steps": 10}, 1)
    assert prune(CFG, rx("^null$")) == ({"seed": None}, 1)
    assert prune(CFG, rx("zzz-not-there")) == (MISSING, 0)
    assert prune("plain text", rx("text")) == ("plain text", 1)


def test_search_config_json_and_text():
    text, lang, hits = search_config(CFG, rx("rank"))
    assert lang == "json" and hits == 1
    assert json.loads(text) == {"model": {"lora": {"rank": 8}}}
    text, lang, hits = search_config(CFG, None)
    assert json.loads(text) == CFG and hits == 0
    text, lang, hits = search_config(CFG, rx("nothing-matches"))
    assert (text, hits) == ("", 0)
    toml = "[model]\nname = \"Qwen/Qwen3-4B\"\n[optim]\nlr = 1e-6\n# model notes: model\n"
    text, lang, hits = search_config(toml, rx("model"))
    assert lang == "text"
    assert text.splitlines() == ["[model]", "# model notes: model"]
    assert hits == 3


def test_filter_text_counts_every_occurrence():
    shown, hits = filter_text("a b a\nc\nA\n", rx("a"))
    assert shown == "a b a\nA" and hits == 3


def test_search_over_sample_config_files():
    run = rd.open_run(NEW_RUN)
    for name, value in run.configs().items():
        text, lang, hits = search_config(value, rx("max_steps"))
        raw = (NEW_RUN / "configs" / "attempt_2" / name).read_text()
        if isinstance(value, dict):
            # every max_steps key in the file is a hit, and every hit is kept in the output
            assert hits == raw.count('"max_steps"')
            assert text.count('"max_steps"') == hits
        else:
            assert hits == sum(line.lower().count("max_steps") for line in raw.splitlines())


def test_render_and_language():
    assert render({"a": 1}) == ('{\n  "a": 1\n}', "json")
    assert render(None) == ("", "text")
    assert render("x = 1") == ("x = 1", "text")
    assert [language_for(n) for n in ("a.json", "rl.toml", "command.txt", "x.log")] == ["json", "toml", "bash", "text"]


# runs table ---------------------------------------------------------------------------------------
@pytest.fixture
def runs(tmp_path):
    copy_run(NEW_RUN, tmp_path / "a")
    copy_run(OLD_RUN, tmp_path / "a")
    copy_run(OLD_RUN, tmp_path / "a", name="gsm8k--qwen3-8b--12345678")
    return rd.discover([tmp_path / "a"], now=0.0)


def test_filter_runs_by_regex_kind_status(runs):
    assert len(runs) == 3
    got, err = filter_runs(runs, name_regex="QWEN3-0")
    assert err is None and list(got["name"]) == [n for n in runs["name"] if "qwen3-0" in n]
    assert len(got) == 1
    got, err = filter_runs(runs, name_regex="^(gsm8k|math)")
    assert sorted(got["name"]) == sorted(n for n in runs["name"] if n.startswith(("gsm8k", "math")))
    got, _ = filter_runs(runs, kinds=["prime-rl"])
    assert len(got) == 3
    got, _ = filter_runs(runs, kinds=["verl"])
    assert len(got) == 0
    statuses = set(runs["status"])
    got, _ = filter_runs(runs, statuses=list(statuses))
    assert len(got) == 3
    got, _ = filter_runs(runs, statuses=["completed"])
    assert list(got["name"]) == list(runs[runs.status == "completed"]["name"])
    assert list(got.index) == list(range(len(got)))


def test_filter_runs_invalid_regex_reports_and_keeps_rows(runs):
    got, err = filter_runs(runs, name_regex="qwen[")
    assert err.startswith("invalid regex") and len(got) == len(runs)


def test_filter_runs_empty_frame():
    empty = rd.discover([])
    got, err = filter_runs(empty, kinds=["prime-rl"], statuses=["running"], name_regex="x")
    assert err is None and len(got) == 0


# settings -----------------------------------------------------------------------------------------
def test_check_added_dir_inside_and_outside(tmp_path):
    root = tmp_path / "root"
    inside = root / "team" / "runs"
    inside.mkdir(parents=True)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (tmp_path / "root-sibling").mkdir()
    roots = [str(root)]
    assert check_added_dir(str(inside), roots) == (str(inside), None)
    assert check_added_dir(f"  {inside}  ", roots) == (str(inside), None)
    assert check_added_dir(str(root), roots) == (str(root), None)
    path, err = check_added_dir(str(outside), roots)
    assert path is None and "outside the allowed roots" in err
    path, err = check_added_dir(str(root / ".." / "elsewhere"), roots)
    assert path is None and "outside" in err
    path, err = check_added_dir(str(tmp_path / "root-sibling"), roots)  # a prefix is not a parent
    assert path is None and "outside" in err
    path, err = check_added_dir(str(root / "missing"), roots)
    assert path is None and "no such directory" in err
    assert check_added_dir("   ", roots)[1] == "enter a directory path"
    path, err = check_added_dir(str(inside), [])
    assert path is None and "none configured" in err


def test_check_added_dir_symlink_escaping_roots(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    outside = tmp_path / "secret"
    outside.mkdir()
    os.symlink(outside, root / "link-out")
    (root / "real").mkdir()
    os.symlink(root / "real", root / "link-in")
    path, err = check_added_dir(str(root / "link-out"), [str(root)])
    assert path is None and "outside" in err
    path, err = check_added_dir(str(root / "link-out" / "."), [str(root)])
    assert path is None
    assert check_added_dir(str(root / "link-in"), [str(root)])[1] is None
    # a root given through a symlink still contains its real children
    os.symlink(root, tmp_path / "root-link")
    assert check_added_dir(str(root / "real"), [str(tmp_path / "root-link")])[1] is None


def test_startup_dirs_and_roots(tmp_path):
    assert startup_dirs(["-x", str(tmp_path), ""], environ={}) == [str(tmp_path)]
    env = {"RUNDASH_DIRS": f"{tmp_path}/a{os.pathsep}{tmp_path}/b", "RUNDASH_ROOTS": str(tmp_path)}
    assert startup_dirs([], environ=env) == [f"{tmp_path}/a", f"{tmp_path}/b"]
    assert allowed_roots(["/x"], environ=env) == [str(tmp_path)]
    assert allowed_roots(["/x"], environ={}) == ["/x"]


# the budget: a huge one-line config never reaches the browser whole --------------------------------
from rundash_core.views.config_search import CONTEXT, MAX_LINE, MAX_MATCHES, shown_config, within_budget  # noqa: E402

SEEN = rx("qwen").count(BIG_LINE)  # a search reads a line's first MAX_INPUT_CHARS (1 MB): fewer than 40,000


def test_a_long_line_is_cut_around_its_matches_and_says_so():
    assert len(BIG_LINE) > 1_000_000
    text, notes = within_budget(BIG_LINE, rx("qwen-00000"))
    assert len(text) < 2 * MAX_MATCHES * (2 * CONTEXT + 20) and "qwen-0000007" in text
    assert notes == [f"line 1 cut to {CONTEXT} characters around each match of its {len(BIG_LINE):,}"]
    text, notes = within_budget(BIG_LINE, rx("qwen"))  # 40,000 matches: the first MAX_MATCHES shown
    assert notes[0] == f"showing {MAX_MATCHES} of {SEEN:,}+ matches" and len(text) < 2 * MAX_MATCHES * (2 * CONTEXT + 30)
    assert f"qwen-{MAX_MATCHES - 1:07d}" in text and f"qwen-{MAX_MATCHES + 50:07d}" not in text
    text, notes = within_budget(BIG_LINE, None)
    assert text == BIG_LINE[:MAX_LINE] + " …" and notes == [f"line 1 cut at {MAX_LINE:,} of its {len(BIG_LINE):,} characters"]
    small = "a = 1\nb = 2"
    assert within_budget(small, rx("a")) == (small, []) and within_budget(small, None) == (small, [])


def test_shown_config_keeps_highlighting_for_small_files_only():
    text, lang, hits, notes = shown_config("rl.toml", "lr = 1e-6\nmodel = 'x'", rx("model"))
    assert (lang, hits, notes) == ("toml", 1, []) and text == "model = 'x'"
    text, lang, hits, notes = shown_config("command.txt", BIG_LINE, rx("qwen"))
    assert hits == SEEN and len(text) < 300_000 and notes[0] == f"showing {MAX_MATCHES} of {SEEN:,}+ matches"


def test_config_page_sends_a_bounded_text_for_a_huge_one_line_config(monkeypatch, tmp_path):
    """AppTest: a 1.2 MB one-line command.txt, with and without a matching search: every code
    block the page sends is bounded and the cut is said plainly."""
    from helpers import open_page

    run = copy_run(NEW_RUN, tmp_path / "outputs")
    (run / "configs" / "attempt_2" / "command.txt").write_text(BIG_LINE)
    at = open_page(monkeypatch, tmp_path / "outputs", "pages/config.py", {"run": run.name})
    assert max(len(c.value) for c in at.code) < 50_000
    assert any(f"cut at {MAX_LINE:,} of its {len(BIG_LINE):,} characters" in c.value for c in at.caption), \
        [c.value for c in at.caption]
    at.text_input(key="cfg_search").set_value("qwen").run()
    assert not at.exception
    sent = [c.value for c in at.code]
    assert sent and sum(map(len, sent)) < 300_000 and any("qwen-0000001" in c for c in sent)
    from rundash_core.views.display_text import md_escape

    assert any(md_escape(f"showing {MAX_MATCHES} of {SEEN:,}+ matches") in c.value for c in at.caption)
