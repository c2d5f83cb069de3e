"""The Settings page through AppTest: dirs and roots, live cache statistics and the clear button,
the tokenizer, the AI endpoint without its key, the theme of .streamlit/config.toml."""
from __future__ import annotations

import tomllib

from streamlit.testing.v1 import AppTest

from rundash_core import cache, settings

from helpers import NEW_RUN, REPO, copy_run

ROOT = REPO
SECRET = "sk-test-DO-NOT-SHOW-0123456789abcdef"


def _texts(at) -> str:
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption] + [e.value for e in at.error]
    parts += [f"{m.label}={m.value} ({m.help})" for m in at.metric]
    parts += [b.label + str(b.help) for b in at.button]
    return "\n".join(map(str, parts))


def _metric(at, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def _settings_page(monkeypatch, tmp_path, **env) -> AppTest:
    out = copy_run(NEW_RUN, tmp_path / "root" / "outputs").parent
    monkeypatch.setenv("RUNDASH_DIRS", str(out))
    monkeypatch.setenv("RUNDASH_ROOTS", str(tmp_path / "root"))
    monkeypatch.setenv("RUNDASH_CACHE_DIR", str(tmp_path / "cache"))
    for k in ("RUNDASH_TOKENIZER", "OPENAI_BASE_URL", "OPENAI_API_KEY", "RUNDASH_AI_MODEL"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    cache.shared.clear()
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=90)
    at.query_params["run"] = NEW_RUN.name
    at.run()
    at.switch_page("pages/metrics.py").run()  # fills the shared cache
    at.switch_page("pages/settings.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_settings_show_dirs_roots_tokenizer_ai_and_theme(monkeypatch, tmp_path):
    at = _settings_page(monkeypatch, tmp_path, RUNDASH_TOKENIZER=str(tmp_path / "tok" / "tokenizer.json"),
                        OPENAI_BASE_URL="http://llm.internal:8000/v1", OPENAI_API_KEY=SECRET,
                        RUNDASH_AI_MODEL="qwen3-32b")
    text = _texts(at)
    assert str(tmp_path / "root" / "outputs") in text and str(tmp_path / "root") in text
    assert str(tmp_path / "tok" / "tokenizer.json") in text
    assert "http://llm.internal:8000/v1" in text and "qwen3-32b" in text and "key set" in text
    assert SECRET not in text and SECRET[:12] not in text
    theme = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())["theme"]
    for key, value in theme.items():
        assert key in text and str(value) in text


def test_settings_without_ai_or_tokenizer_say_so(monkeypatch, tmp_path):
    text = _texts(_settings_page(monkeypatch, tmp_path))
    assert "no key" in text and "RUNDASH_TOKENIZER` is not set" in text


def test_cache_statistics_are_live_and_the_cache_clears(monkeypatch, tmp_path):
    at = _settings_page(monkeypatch, tmp_path)
    stats = cache.shared.stats()
    assert stats["entries"] > 0 and stats["bytes"] > 0 and stats["misses"] > 0
    assert _metric(at, "Entries") == f"{stats['entries']:,}"
    assert _metric(at, "Size") == f"{stats['bytes'] / 2**20:,.1f} MB"
    assert _metric(at, "Hit rate") == f"{stats['hits'] / (stats['hits'] + stats['misses']):.0%}"
    next(b for b in at.button if b.label == "Clear the cache").click()
    at.run()
    assert not at.exception
    after = cache.shared.stats()  # emptied, then refilled only with what the run card and sidebar read
    assert after["entries"] < stats["entries"] and after["bytes"] < stats["bytes"]
    assert _metric(at, "Entries") == f"{after['entries']:,}"


def test_ai_endpoint_never_holds_the_key():
    shown = settings.ai_endpoint({"OPENAI_API_KEY": SECRET, "OPENAI_BASE_URL": "http://x/v1"})
    assert shown == {"base_url": "http://x/v1", "model": None, "key": "key set"}
    assert settings.ai_endpoint({})["key"] == "no key"
    assert settings.theme("/no/such/config.toml") == {}
