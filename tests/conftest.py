"""Fixtures shared by every tier (plain helpers: the `tests/helpers/` package; a tier's own fixtures:
its conftest.py)."""
from __future__ import annotations

from pathlib import Path

import pytest

from rundash_core import cache
from rundash_core.io import jsonl

from helpers import NEW_RUN, OLD_RUN, copy_run


def _scan_components_once() -> None:
    """Every AppTest starts a Streamlit runtime, and each runtime scans the metadata of every
    installed distribution for Streamlit components (`manifest_scanner.scan_component_manifests`):
    0.23 s of a 0.36 s page test here. What is installed does not change while the tests run, so
    each test process scans once (the servers the browser tests start scan as they always do)."""
    import functools

    from streamlit.components.v2 import manifest_scanner

    if not hasattr(manifest_scanner.scan_component_manifests, "cache_info"):
        manifest_scanner.scan_component_manifests = functools.cache(manifest_scanner.scan_component_manifests)


_scan_components_once()


@pytest.fixture
def parsed(monkeypatch):
    """Record every byte range handed to the JSONL parser."""
    calls: list[bytes] = []
    real = jsonl.parse_jsonl_bytes

    def spy(buf, problems, **kw):
        calls.append(bytes(buf))
        return real(buf, problems, **kw)

    monkeypatch.setattr(jsonl, "parse_jsonl_bytes", spy)
    return calls


@pytest.fixture(autouse=True)
def _fresh_cache():
    """Parsed state lives in a process-wide cache: every test starts and ends without it. The
    allowed roots a test sets (`files.set_roots`, a context variable) end with the test."""
    from rundash_core.io import files

    cache.shared.clear()
    with files.restricted_to(None):
        yield
    cache.shared.clear()


@pytest.fixture
def new_run(tmp_path) -> Path:
    """A writable copy of the current-layout sample run (two attempts, resumed)."""
    return copy_run(NEW_RUN, tmp_path / "out")


@pytest.fixture
def old_run(tmp_path) -> Path:
    """A writable copy of the August-layout sample run (configs/*.json, root metrics.jsonl)."""
    return copy_run(OLD_RUN, tmp_path / "old")


@pytest.fixture(scope="session")
def _demo_builds(tmp_path_factory):
    """Built demos of this test run (per xdist worker), newest last: (folder, written at)."""
    return []


@pytest.fixture(scope="module")
def demo_runs(_demo_builds, tmp_path_factory):
    """The built-in demo (every kind of run) and its runs list. Written once and shared, but written
    again when older than half of `RUNNING_WINDOW_S`: its live run must still look running (the whole
    suite takes longer than the window), and the runs list is read per module, never from a cache."""
    import time

    import rundash_core as rd
    from rundash_core import demo
    from rundash_core.overview import RUNNING_WINDOW_S

    if not _demo_builds or time.time() - _demo_builds[-1][1] > RUNNING_WINDOW_S / 2:
        _demo_builds.append((demo.ensure_demo(tmp_path_factory.mktemp("demo") / "demo"), time.time()))
    folder = _demo_builds[-1][0]
    return folder, rd.discover([folder])


@pytest.fixture
def tables(monkeypatch):
    """Every st.dataframe call of a page: (data, keyword arguments)."""
    import streamlit

    calls = []
    real = streamlit.dataframe

    def spy(data=None, *args, **kwargs):
        calls.append((data, kwargs))
        return real(data, *args, **kwargs)

    monkeypatch.setattr(streamlit, "dataframe", spy)
    return calls


def _utf8(value):
    """`value` with every string made UTF-8 encodable (a lone surrogate, from a file name that is not
    UTF-8, becomes its backslash escape)."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {k: _utf8(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_utf8(v) for v in value)
    return value


@pytest.hookimpl(wrapper=True)
def pytest_report_to_serializable(config, report):
    """pytest-xdist sends each report to the controller as UTF-8: a captured log line naming a hostile
    file (`bad\\udcff.log`) would crash the worker and end the whole run."""
    data = yield
    return _utf8(data) if data is not None else None
