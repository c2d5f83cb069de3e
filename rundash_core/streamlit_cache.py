"""The one place where rundash_core meets Streamlit: caching of runs lists and Run objects, and
the server's allowed roots set in each script run's thread (`use_roots`).

Parsed file state lives in `rundash_core.cache.shared` (shared by all sessions, bounded in bytes,
keyed by file identity); this module only adds the Streamlit-side caches that make reruns cheap.
"""
from __future__ import annotations

import os
import sys

import pandas as pd
import streamlit as st

from rundash_core import settings
from rundash_core.discover import scan
from rundash_core.io import files
from rundash_core.run import Run
from rundash_core.sources import open_run


@st.cache_resource(show_spinner="Writing the built-in demo runs…")
def demo_dir() -> str:
    """The demo output folder, written once per machine; its live run keeps growing."""
    from rundash_core import demo  # only when no directory is configured

    folder = demo.ensure_demo()
    demo.start_live_writer(folder)
    return str(folder)


def startup() -> tuple[tuple[str, ...], tuple[str, ...], bool]:
    """(dirs, allowed roots, is_demo) for this server: `app.py -- DIR...`, RUNDASH_DIRS, or demo.
    Every read of this script run is then limited to the allowed roots (`use_roots`)."""
    dirs, roots, is_demo = _server()
    files.set_roots(settings.read_roots(roots))  # (+ rundash's own imports folder)
    return dirs, roots, is_demo


def use_roots() -> None:
    """Limit this thread's reads to the server's allowed roots. The roots are a context variable
    (`files`), and Streamlit runs every script run, fragment rerun and widget callback in a thread
    that starts without them: app.py sets them through `startup`, `pages._ui.in_session` for the
    rest."""
    files.set_roots(settings.read_roots(_server()[1]))


def _server() -> tuple[tuple[str, ...], tuple[str, ...], bool]:
    argv = tuple(sys.argv[1:]) if os.path.basename(sys.argv[0]) == "app.py" else ()
    env = tuple(os.environ.get(k, "") for k in ("RUNDASH_DIRS", "RUNDASH_ROOTS"))
    return _startup(argv, env)


@st.cache_resource(show_spinner=False)
def _startup(argv: tuple[str, ...], env: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...], bool]:
    environ = {"RUNDASH_DIRS": env[0], "RUNDASH_ROOTS": env[1]}
    dirs = settings.startup_dirs(list(argv), environ)
    if dirs:
        return tuple(dirs), tuple(settings.allowed_roots(dirs, environ)), False
    folder = demo_dir()
    return (folder,), tuple(settings.allowed_roots([folder], environ)), True


@st.cache_data(ttl=5, max_entries=64, show_spinner=False)
def runs_scan(dirs: tuple[str, ...]) -> tuple[pd.DataFrame, list[str]]:
    """The runs list (cheap: file ends and stats) and the tracked dirs that cannot be read;
    refreshed every few seconds."""
    return scan(list(dirs))


def runs_frame(dirs: tuple[str, ...]) -> pd.DataFrame:
    return runs_scan(dirs)[0]


@st.cache_resource(max_entries=512)
def get_run(path: str, run_id: str) -> Run:
    """A Run object per directory; it re-reads only appended bytes on every frame call."""
    return open_run(path, run_id=run_id)
