"""Finding a run's tokenizer where it is on disk (issue 23), before asking for RUNDASH_TOKENIZER:
a local model folder named in the run's config (prime-rl `model.name`, verl
`actor_rollout_ref.model.path`), the Hugging Face cache under `$HF_HOME/hub` for the config's
model id (a bare folder name: any org's, a cache snapshot path: its repo), and every place looked
named when none is found. With the real tokenizer.json the test extra ships, in temp layouts."""
from __future__ import annotations

import json
import shutil

import pytest

import rundash_core as rd
from rundash_core.frames import Episode
from rundash_core.io import files
from rundash_core.views import tokenizer_files as tf
from rundash_core.views import tokens as tk

from helpers import DATA
from helpers.tokens import deepseek_tokenizer_json, hf_cache_entry

TRACES_RUN = DATA / "prime-rl-traces" / "math-python+wiki-search--qwen3-4b--0b45f1ec"
LEGO_LOG = DATA / "lego" / "logs" / "qwen3-8b-swegym-gspo-async-r1.log"
SNAPSHOT_LOG = DATA / "verl" / "dq_math.log"  # actor_rollout_ref.model.path: a cluster's HF cache snapshot


def _token_episode(run):
    return next(e for s in run.samples()["sample_id"] if (e := run.episode(s)).tokens is not None)


def _decoded(view) -> bool:
    """The tokens' text is the shipped tokenizer's (mostly words: its vocabulary is not Qwen's, so a
    few ids it does not know stay ⟨id⟩), not the ids."""
    texts = view.table["text"].tolist()
    ids = [int(i) for i in view.table["token_id"]]
    want, _ = tk.decode_pieces(tf.load_tokenizer(deepseek_tokenizer_json()), ids)
    unknown = sum(t.startswith("⟨") and t.endswith("⟩") for t in texts)
    return len(texts) > 10 and texts == want and unknown < len(texts) / 2


@pytest.fixture
def hf_home(tmp_path, monkeypatch):
    home = tmp_path / "hf"
    (home / "hub").mkdir(parents=True)
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("RUNDASH_TOKENIZER", raising=False)
    monkeypatch.setenv("HF_HOME", str(home))
    return home


def test_the_config_model_id_is_found_in_the_hf_cache(hf_home):
    cached = hf_cache_entry(hf_home / "hub", "Qwen/Qwen3-4B", deepseek_tokenizer_json())
    run = rd.open_run(TRACES_RUN)
    view = tk.episode_token_view(run, _token_episode(run))
    assert (view.lookup.origin, view.lookup.path) == ("Hugging Face cache", str(cached))
    assert _decoded(view)  # text, not a wall of ⟨id⟩s


def test_a_local_model_folder_in_the_config_is_read(hf_home, tmp_path):
    model = tmp_path / "models" / "Qwen3-4B"
    model.mkdir(parents=True)
    shutil.copy(deepseek_tokenizer_json(), model / "tokenizer.json")
    run_dir = tmp_path / "runs" / TRACES_RUN.name
    shutil.copytree(TRACES_RUN, run_dir, symlinks=True)
    for conf in run_dir.glob("configs/attempt_*/resolved/*.json"):
        data = json.loads(conf.read_text())
        if isinstance(data.get("model"), dict):
            data["model"]["name"] = str(model)
        conf.write_text(json.dumps(data))
    run = rd.open_run(run_dir)
    assert str(model) in tf.model_names(run, Episode("x", run.run_id))
    view = tk.episode_token_view(run, _token_episode(run))
    assert (view.lookup.origin, view.lookup.path) == ("model folder", str(model / "tokenizer.json"))
    assert _decoded(view)
    files.set_roots([tmp_path / "runs"])  # the folder outside the allowed roots: not read, and said
    view = tk.episode_token_view(run, _token_episode(run))
    assert view.lookup.tokenizer is None
    assert f"model folder: {model} ({files.OUTSIDE_ROOTS}) (no tokenizer.json)" in view.lookup.looked


def test_a_bare_folder_name_is_looked_up_under_any_org(hf_home):
    run = rd.open_run(LEGO_LOG)  # actor_rollout_ref.model.path=/mnt/shared/models/Qwen3-8B
    names = tf.model_names(run, Episode("x", run.run_id))
    assert names[0] == "/mnt/shared/models/Qwen3-8B" and "Qwen3-8B" in names
    missing = tf.find_tokenizer(names)
    assert missing.tokenizer is None
    assert missing.looked == ["model folder: /mnt/shared/models/Qwen3-8B (no tokenizer.json)",
                              f"Hugging Face cache: {hf_home / 'hub'}/models--*--Qwen3-8B (no tokenizer.json)"]
    cached = hf_cache_entry(hf_home / "hub", "Qwen/Qwen3-8B", deepseek_tokenizer_json())
    found = tf.find_tokenizer(names)
    assert (found.origin, found.path) == ("Hugging Face cache", str(cached))


def test_a_snapshot_path_of_another_cache_names_its_repo(hf_home):
    run = rd.open_run(SNAPSHOT_LOG)
    names = tf.model_names(run, Episode("x", run.run_id))
    assert "/models--Qwen--Qwen2-7B-Instruct/snapshots/" in names[0]
    cached = hf_cache_entry(hf_home / "hub", "Qwen/Qwen2-7B-Instruct", deepseek_tokenizer_json())
    found = tf.find_tokenizer([names[0]])  # the path alone: its repo looked up in this machine's cache
    assert (found.origin, found.path) == ("Hugging Face cache", str(cached))
    assert found.looked[0] == f"model folder: {names[0]} (no tokenizer.json)"


def test_a_model_folder_inside_the_hf_cache_is_read_outside_the_roots(hf_home, tmp_path):
    cached = hf_cache_entry(hf_home / "hub", "deepseek-ai/DeepSeek-V4", deepseek_tokenizer_json())
    files.set_roots([tmp_path / "runs"])
    found = tf.find_tokenizer([str(cached.parent)])
    assert (found.origin, found.path) == ("model folder", str(cached))
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    shutil.copy(deepseek_tokenizer_json(), outside / "tokenizer.json")
    assert tf.find_tokenizer([str(outside)]).tokenizer is None


def test_only_a_tokenizer_json_is_ever_read(hf_home, tmp_path, monkeypatch):
    secret = tmp_path / "secret.txt"
    secret.write_text("not for the page")
    opened = []
    real = files.open_file
    monkeypatch.setattr(files, "open_file", lambda p, *a, **k: opened.append(str(p)) or real(p, *a, **k))
    found = tf.find_tokenizer([str(secret), str(tmp_path), "../../etc/passwd", str(tmp_path / "..")])
    assert found.tokenizer is None and found.error is None
    assert all(p.endswith("/tokenizer.json") for p in opened)
    assert f"model folder: {secret} (no tokenizer.json)" in found.looked


def test_the_token_panel_reads_the_cached_tokenizer_and_names_where_it_looked(monkeypatch, hf_home):
    from helpers import open_page

    cached = hf_cache_entry(hf_home / "hub", "Qwen/Qwen3-4B", deepseek_tokenizer_json())
    runs = rd.discover([TRACES_RUN.parent])
    run_id = runs[runs["path"] == str(TRACES_RUN)]["run_id"].iloc[0]
    ep = _token_episode(rd.open_run(TRACES_RUN))
    query = {"run": run_id, "sample": ep.sample_id, "tokens": "true"}
    at = open_page(monkeypatch, TRACES_RUN.parent, "pages/trajectory.py", query)
    captions = [c.value.replace("\\", "") for c in at.caption]
    assert any(str(cached) in c and "Hugging Face cache" in c for c in captions)
    shutil.rmtree(hf_home / "hub" / "models--Qwen--Qwen3-4B")
    at = open_page(monkeypatch, TRACES_RUN.parent, "pages/trajectory.py", query)
    caption = next(c.value.replace("\\", "") for c in at.caption if "No tokenizer.json found" in c.value)
    assert f"Hugging Face cache: {hf_home / 'hub'}/models--Qwen--Qwen3-4B (no tokenizer.json)" in caption
    assert "RUNDASH_TOKENIZER" in caption
