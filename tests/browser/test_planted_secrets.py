"""The planted-secret test (issue 24): the secret corpus planted in every text field of a run of
every kind (`planted_runs`), then everything each surface delivers is read and no planted
`.secret` may appear: the API (every Run method, default use), every page through AppTest (the
whole element tree, serialized), the browser (every websocket frame), the terminal view, the CLI,
the AI context and the downloads. `python tests/browser/test_planted_secrets.py` prints the table
surface × spellings planted × spellings out, with the families that leak, from the same helpers.
"""
from __future__ import annotations

import asyncio
import contextlib
import functools
import io
import json
import sys
import time
from pathlib import Path
from urllib.parse import urlencode

import pandas as pd
import pytest

import rundash_core as rd
from rundash_core import cache
from rundash_core.views.display_text import md_escape

from helpers import REPO, app_pages
from helpers.planted_finder import leaked, text_of
from helpers.planted_runs import MARK, plant
from helpers.secret_corpus import SPELLINGS

ROOT = REPO
SURFACES = ("API", "pages", "browser", "terminal view", "CLI", "AI context", "downloads")


def episodes_to_open(run) -> list[str]:
    """The sample ids whose episode holds a planted model output (MARK), at most three."""
    out = []
    for sid in run.samples()["sample_id"].astype(str):
        try:
            ep = run.episode(sid)
        except KeyError:
            continue
        if MARK in text_of(ep.messages):
            out.append(sid)
            if len(out) == 3:
                break
    return out


# Surfaces -----------------------------------------------------------------------------------------
def api_text(run) -> str:
    """Everything the library answers about a run, in default (non-reveal) use."""
    from rundash_core.views.tokens import episode_token_view

    parts = [run.overview(), run.metrics(), run.config(), run.configs(), run.problems(), run.steps(),
             run.validation(), run.val_cot(), run.failure_modes(), run.eval_plan(), run.health(), run.live_samples()]
    for attempt in run.attempts():
        parts.append(run.configs(attempt))
    samples = run.samples()
    parts.append(samples)
    for sid in samples["sample_id"].astype(str):
        try:
            ep = run.episode(sid)
        except KeyError as e:
            parts.append(str(e))
            continue
        parts.append(ep)
        if ep.tokens is not None:
            parts.append(episode_token_view(run, ep).table)
    logs = run.logs()
    parts.append(logs)
    if len(logs):
        paths = logs["path"].astype(str).tolist()
        parts.append(run.read_log(paths, tail=100_000))
        for p in paths:
            parts.append(run.read_log([p], tail=100_000))
    reports = run.reports()
    parts.append(reports)
    for name in reports["name"].astype(str):
        parts.append(run.report(name))
    return text_of(*parts)


def _element_bytes(node) -> bytes:
    """A node of AppTest's element tree and all below it, serialized (markdown, code, captions,
    expander labels, dataframes' Arrow bytes, plotly JSON with hover text, json bodies), plus
    every dataframe's value as text."""
    out = []
    proto = getattr(node, "proto", None)
    if proto is not None and hasattr(proto, "SerializeToString"):
        out.append(proto.SerializeToString())
    if type(node).__name__ == "Dataframe":
        with contextlib.suppress(Exception):
            out.append(text_of(node.value).encode("utf-8", "surrogatepass"))
    for child in getattr(node, "children", {}).values():
        out.append(_element_bytes(child))
    return b"\n".join(out)


def _page_runs(run_id: str, sids: list[str]):
    """(page, query) of every page for the run, and Trajectory with planted episodes open (one
    with its token view too)."""
    for page in app_pages():
        yield page, {"run": run_id}
    for sid in sids[:2]:
        yield "pages/trajectory.py", {"run": run_id, "sample": sid}
    for sid in sids[:1]:
        yield "pages/trajectory.py", {"run": run_id, "sample": sid, "tokens": "true"}


@functools.cache
def pages_and_downloads(folder: str) -> tuple[dict[str, set[int]], dict[str, set[int]]]:
    """Every page for each planted run through AppTest: what its element tree holds, and the
    bytes of every download it offers (st.download_button's data, made as a click would)."""
    import streamlit
    from streamlit.testing.v1 import AppTest

    pages, downloads = {}, {}
    for kind, run_id, path in _runs(folder):
        sids = episodes_to_open(rd.open_run(path))
        got_p, got_d = set(), set()
        offered: list = []
        real = streamlit.download_button

        def spy(label, data=None, *args, **kwargs):
            offered.append(data() if callable(data) else data)
            return real(label, data, *args, **kwargs)

        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("RUNDASH_DIRS", folder)
            mp.delenv("RUNDASH_ROOTS", raising=False)
            mp.setattr(streamlit, "download_button", spy)
            for page, query in _page_runs(run_id, sids):
                cache.shared.clear()
                at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=90)
                for k, v in query.items():
                    at.query_params[k] = v
                at.run()
                at.switch_page(page).run()
                got_p |= leaked(_element_bytes(at._tree))
        for data in offered:
            got_d |= leaked(data if isinstance(data, (str, bytes)) else text_of(data))
        pages[kind], downloads[kind] = got_p, got_d
    return pages, downloads


def terminal_text(path: str) -> str:
    """The terminal view of one run: every tab's screen and every widget's full text (a Samples
    tab stepped through a few samples)."""
    from textual.widgets import DataTable, Static

    from rundash_core.tui.app import TABS, RundashApp

    seen: list[str] = []

    def grab(app):
        seen.append(app.export_screenshot())
        for w in app.screen.query(Static):
            seen.append(str(w.render()))
        for t in app.screen.query(DataTable):
            for i in range(t.row_count):
                seen.append(" ".join(str(c) for c in t.get_row_at(i)))

    async def go():
        app = RundashApp([path])
        async with app.run_test(size=(150, 50)) as pilot:
            await pilot.pause()
            for key, _title in TABS:
                app.screen.query_one("#run-tabs").active = f"tab-{key}"
                await pilot.pause()
                await pilot.pause()
                grab(app)
                if key == "samples":
                    for _ in range(4):
                        await pilot.press("right")
                        await pilot.pause()
                        grab(app)
    asyncio.run(go())
    return "\n".join(seen)


def cli_text(path: str) -> str:
    from rundash_core.serve import cli

    out = []
    for argv in (["status", path, "--json"], ["status", path], ["check-in", path]):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
            with contextlib.suppress(SystemExit):
                cli.main(argv)
        out.append(buf.getvalue())
    return "\n".join(out)


def ai_text(path: str, other: str) -> str:
    from rundash_core import ai

    run, them = rd.open_run(path), rd.open_run(other)
    return "\n".join([ai.analysis_context(run), ai.analysis_context(run, samples=50, budget_tokens=400_000),
                      ai.compare_context(run, them)])


QUIET_S = 0.3  # no websocket frame for this long after the script ran: the page got what it gets


def quiet_since(page, last: list[float], quiet_s: float, most_s: float = 3.0) -> None:
    """Wait until no frame has arrived for `quiet_s` seconds (`last[0]`: when the last one did),
    `most_s` at most: late frames are read too, without a fixed sleep per page."""
    began = time.monotonic()
    while time.monotonic() - last[0] < quiet_s and time.monotonic() - began < most_s:
        page.wait_for_timeout(50)


def browser_frames(folder: str) -> dict[str, set[int]]:
    """One server, one browser: every websocket frame received while opening Trajectory (with an
    episode open, and its token view), Logs, Config and Reports (where the run has them) for each
    planted run."""
    from playwright.sync_api import sync_playwright

    from helpers.browser import CHROMIUM, CHROMIUM_ARGS
    from helpers.serving import launched_rundash

    base = Path(folder).parent / "browser"
    base.mkdir(exist_ok=True)
    out: dict[str, set[int]] = {}
    with launched_rundash(base, [folder, "--yes", "--host", "127.0.0.1"]) as (port, _log), sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            for kind, run_id, path in _runs(folder):
                run = rd.open_run(path)
                sids = episodes_to_open(run)[:1]
                stems = ["logs"] + ["config"] * bool(run.configs()) + ["reports"] * bool(len(run.reports()))
                frames: list[bytes] = []
                last = [time.monotonic()]

                def received(f, frames=frames, last=last):
                    frames.append(f if isinstance(f, bytes) else f.encode("utf-8", "replace"))
                    last[0] = time.monotonic()
                page = browser.new_context(viewport={"width": 1600, "height": 1000}).new_page()
                page.on("websocket", lambda ws, received=received: ws.on("framereceived", received))
                urls = [f"trajectory?{urlencode({'run': run_id, 'sample': s})}" for s in sids]
                urls += [f"trajectory?{urlencode({'run': run_id, 'sample': s, 'tokens': 'true'})}" for s in sids]
                urls += [f"{stem}?{urlencode({'run': run_id})}" for stem in stems]
                for url in urls:
                    page.goto(f"http://127.0.0.1:{port}/{url}")
                    page.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]', timeout=90000)
                    quiet_since(page, last, QUIET_S)  # (late frames count too)
                page.context.close()
                out[kind] = leaked(b"\n".join(frames))
        finally:
            browser.close()
    return out


# The planted runs and one collection per surface ----------------------------------------------------
@functools.cache
def _runs(folder: str) -> list[tuple[str, str, str]]:
    """(label, run_id, path) of the planted runs, as discovery lists them; the label is the
    run's kind (with its id when two runs share a kind)."""
    listed = rd.discover([folder])
    kinds = listed["kind"].tolist()
    return [(k if kinds.count(k) == 1 else f"{k} {r}", r, p)
            for k, r, p in zip(kinds, listed["run_id"], listed["path"])]


@functools.cache
def collect(surface: str, folder: str) -> dict[str, set[int]]:
    """Per planted run (`_runs`' label), the spellings whose secret the surface delivers."""
    runs = _runs(folder)
    if surface == "API":
        return {k: leaked(api_text(rd.open_run(p))) for k, _r, p in runs}
    if surface == "pages":
        return pages_and_downloads(folder)[0]
    if surface == "downloads":
        return pages_and_downloads(folder)[1]
    if surface == "terminal view":
        return {k: leaked(terminal_text(p)) for k, _r, p in runs}
    if surface == "CLI":
        return {k: leaked(cli_text(p)) for k, _r, p in runs}
    if surface == "AI context":
        return {k: leaked(ai_text(p, runs[(i + 1) % len(runs)][2])) for i, (k, _r, p) in enumerate(runs)}
    if surface == "browser":
        return browser_frames(folder)
    raise ValueError(surface)


def describe(found: dict[str, set[int]]) -> str:
    """Which spellings (family/syntax) each run leaked."""
    return "; ".join(f"{kind}: " + ", ".join(sorted({f"{SPELLINGS[i].family}/{SPELLINGS[i].syntax}" for i in got}))
                     for kind, got in found.items() if got) or "none"


def table(results: dict[str, dict[str, set[int]]], planted: dict) -> str:
    """Markdown: surface × spellings planted × spellings out (any run, then per run kind), and
    the families that leak; `planted`: `plant`'s answer (which spellings went where)."""
    kinds = list(next(iter(results.values()), {}))
    spread = len({i for r in planted.values() for ids in r.where.values() for i in ids})
    fields = sum(len(r.where) for r in planted.values())
    rows = ["| surface | spellings planted | spellings out | out per run (" + ", ".join(kinds) + ") | families leaking |",
            "|---|---|---|---|---|"]
    for surface, found in results.items():
        out = set().union(*found.values()) if found else set()
        fams = sorted({SPELLINGS[i].family for i in out})
        per = " / ".join(str(len(found.get(k, ()))) for k in kinds)
        rows.append(f"| {surface} | {spread} in {fields} fields of {len(planted)} runs | {len(out)} | {per} "
                    f"| {', '.join(fams) or '—'} |")
    return "\n".join(rows)


@pytest.fixture(scope="module")
def planted(tmp_path_factory) -> str:
    """The four planted runs in one tracked folder (planted once per module)."""
    folder = tmp_path_factory.mktemp("planted") / "runs"
    planted = plant(folder)
    assert len(_runs(str(folder))) == len(planted)
    assert {rd.open_run(p).kind for _k, _r, p in _runs(str(folder))} == set(rd.KINDS)
    return str(folder)


def _no_leak(surface: str, folder: str) -> None:
    found = collect(surface, folder)
    assert set(found) == {label for label, _r, _p in _runs(folder)}, found
    assert not any(found.values()), f"{surface} delivers planted secrets: {describe(found)}"


def test_the_api_returns_no_planted_secret(planted):
    _no_leak("API", planted)


def test_no_page_delivers_a_planted_secret(planted):
    _no_leak("pages", planted)


def test_no_download_carries_a_planted_secret(planted):
    _no_leak("downloads", planted)


def test_the_terminal_view_shows_no_planted_secret(planted):
    pytest.importorskip("textual")
    _no_leak("terminal view", planted)


def test_the_cli_prints_no_planted_secret(planted):
    _no_leak("CLI", planted)


def test_the_ai_context_carries_no_planted_secret(planted):
    _no_leak("AI context", planted)


def test_the_browser_receives_no_planted_secret_over_the_websocket(planted):
    _no_leak("browser", planted)


def test_the_finder_sees_a_planted_value_in_every_form_a_surface_writes_it():
    """The test could fail: each secret is found raw, JSON-escaped and inside Arrow/proto bytes."""
    for i, s in enumerate(SPELLINGS):
        assert i in leaked("x" + s.secret + "y") and i in leaked(json.dumps({"v": "\n" + s.secret}))
        assert i in leaked(md_escape(f"**{s.secret}**")) and i in leaked(json.dumps(md_escape(s.secret)))
    frame = pd.DataFrame({"text": ["a " + SPELLINGS[0].secret]})
    assert 0 in leaked(text_of(frame))


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "runs"
        planted_runs = plant(folder)
        results = {}
        for surface in sys.argv[1:] or SURFACES:
            began = time.monotonic()
            results[surface] = collect(surface, str(folder))
            print(f"{surface} ({time.monotonic() - began:.0f} s): {describe(results[surface])}", file=sys.stderr)
        print(table(results, planted_runs))
