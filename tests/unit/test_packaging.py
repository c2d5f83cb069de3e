"""A non-editable install works: the built wheel, installed into a fresh venv, serves the app.

The wheel ships app.py, pages/ and .streamlit/config.toml as data under <prefix>/share/rundash
(no top-level `app`/`pages` modules in site-packages) and `rundash` must find them there.
The fresh venv borrows this environment's dependencies through a plain-path .pth line, so the
editable rundash finder of this environment is never executed and the wheel's rundash_core wins.
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import time
import urllib.request
from pathlib import Path

import pytest

from helpers import DATA, REPO
from helpers.serving import free_port, stop_group

ROOT = REPO
RUNS = DATA / "relax"


def _can_build_here() -> bool:
    """--no-build-isolation needs setuptools>=68 able to make wheels (bdist_wheel is built in
    since 70.1, older ones need `wheel`); otherwise pip builds in isolation from the index."""
    try:
        version = tuple(int(x) for x in importlib.metadata.version("setuptools").split(".")[:2])
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return False
    return version >= (70, 1) or (version >= (68, 0) and importlib.util.find_spec("wheel") is not None)


def _env(**extra: str) -> dict:
    """This environment minus anything that could put the checkout on the path."""
    return {**{k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "RUNDASH_DIRS")}, **extra}


def _run(cmd: list, env: dict | None = None, **kw) -> str:
    res = subprocess.run([str(c) for c in cmd], env=env or _env(), capture_output=True, text=True, **kw)
    assert res.returncode == 0, f"{cmd}\n{res.stdout}\n{res.stderr}"
    return res.stdout


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    """A fresh venv with the wheel (built from a copy of the source tree, so the checkout gets no
    build/ or stale files) installed non-editably."""
    base = tmp_path_factory.mktemp("packaging")
    src = base / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".git", ".venv", "venv", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache", "tests"))
    flags = ["--no-build-isolation"] if _can_build_here() else []
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", *flags, "-w", base / "whl", src])
    [wheel] = (base / "whl").glob("rundash-*.whl")

    env_dir = base / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", env_dir])
    py = env_dir / "bin" / "python"
    site = Path(_run([py, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]).strip())
    # plain path lines (appended after the venv's own site-packages; .pth files there are not run)
    ours = dict.fromkeys([sysconfig.get_path("purelib"), sysconfig.get_path("platlib")])
    (site / "_rundash_test_deps.pth").write_text("".join(f"{p}\n" for p in ours))
    _run([sys.executable, "-m", "pip", "--python", py, "install", "-q", "--no-deps", wheel])
    return env_dir


def test_wheel_installs_app_as_data_files_not_modules(venv):
    py = venv / "bin" / "python"
    out = _run([py, "-c", "import sysconfig, rundash_core; from rundash_core.serve import cli; "
                "print(sysconfig.get_path('purelib')); print(rundash_core.__file__); print(cli.app_path())"],
               cwd=venv).splitlines()
    site, pkg, app = (Path(p).resolve() for p in out)
    assert pkg.is_relative_to(site) and not pkg.is_relative_to(ROOT)
    assert not (site / "app.py").exists() and not (site / "pages").exists()
    share = (venv / "share" / "rundash").resolve()
    for f in ("app.py", "pages/overview.py", "pages/_ui.py", ".streamlit/config.toml"):
        assert (share / f).is_file(), f
    assert app == share / "app.py"


def test_installed_rundash_serves_the_app(venv, tmp_path):
    port = free_port()
    log = (tmp_path / "server.log").open("w+")
    proc = subprocess.Popen([venv / "bin" / "rundash", RUNS, "--port", str(port), "--host", "127.0.0.1"],
                            cwd=tmp_path, env=_env(RUNDASH_CACHE_DIR=str(tmp_path / "cache")), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 60
        while True:
            try:
                if urllib.request.urlopen(url + "/_stcore/health", timeout=1).read() == b"ok":
                    break
            except OSError:
                pass
            log.seek(0)
            assert proc.poll() is None, f"rundash exited {proc.returncode}:\n{log.read()}"
            assert time.time() < deadline, f"no health answer in 60 s:\n{log.read()}"
            time.sleep(0.3)
        with urllib.request.urlopen(url + "/", timeout=10) as r:
            assert r.status == 200
            assert "<title>Streamlit</title>" in r.read().decode()
    finally:
        stop_group(proc, grace=0)
        log.close()


def test_installed_app_script_runs(venv, tmp_path):
    """The installed app.py itself runs (its `from pages import _ui` included): AppTest with the
    script's folder first on sys.path, as `streamlit run` does."""
    share = venv / "share" / "rundash"
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from streamlit.testing.v1 import AppTest; "
            "at = AppTest.from_file(sys.argv[1] + '/app.py', default_timeout=60).run(); "
            "assert not at.exception, at.exception; assert at.sidebar.selectbox[0].value, 'no run selected'")
    _run([venv / "bin" / "python", "-c", code, share], env=_env(RUNDASH_DIRS=str(RUNS)), cwd=tmp_path)
