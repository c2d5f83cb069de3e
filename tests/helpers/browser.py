"""The browser tier's plain parts (its fixtures are in `tests/browser/conftest.py`): the Chromium
Playwright drives, the app served by `streamlit run app.py`, a fresh page."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from helpers import REPO
from helpers.serving import free_port

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def serve_app(out: Path | None, extra_env: dict) -> tuple[subprocess.Popen, str]:
    """`streamlit run app.py -- OUT` (no OUT: the demo) on a free port; returns once it answers
    its health check (the caller terminates it)."""
    port = free_port()
    env = {**os.environ, **extra_env}
    env.pop("RUNDASH_DIRS", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
         "--server.address", "127.0.0.1", "--server.headless", "true", *(["--", str(out)] if out else [])],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            if urllib.request.urlopen(url + "/_stcore/health", timeout=1).read() == b"ok":
                return proc, url
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise RuntimeError("streamlit did not start: " + proc.stdout.read().decode(errors="replace"))


def fresh_page(browser):
    """A fresh browser context: no cookies, no session, like a colleague opening a link; returns
    (context, page, the messages of the dialogs it opened, dismissed)."""
    ctx = browser.new_context(viewport={"width": 1600, "height": 1000})
    page = ctx.new_page()
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    return ctx, page, dialogs
