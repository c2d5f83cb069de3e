"""`rundash [DIR ...]`: start the dashboard on directories (or on the built-in demo)."""
from __future__ import annotations

import argparse
import os
import sys
import sysconfig
from pathlib import Path


def app_path() -> Path:
    """The dashboard's app.py: next to the package in a checkout (`pip install -e .`), else in
    <prefix>/share/rundash where a wheel install puts it (pyproject's data-files)."""
    user = sysconfig.get_path("data", sysconfig.get_preferred_scheme("user"))  # pip install --user
    candidates = [Path(__file__).resolve().parent.parent / "app.py"]
    for data in (sysconfig.get_path("data"), sys.prefix, user):
        candidates.append(Path(data) / "share" / "rundash" / "app.py")
    for path in candidates:
        if path.is_file() and (path.parent / "pages" / "_ui.py").is_file():  # not some other app.py
            return path
    raise SystemExit("rundash: cannot find app.py; looked in:\n  " + "\n  ".join(map(str, candidates)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rundash", description=__doc__)
    parser.add_argument("dirs", nargs="*", help="output directories holding runs (default: the demo)")
    parser.add_argument("--port", type=int, default=None, help="port to serve on (Streamlit's default: 8501)")
    parser.add_argument("--host", default=None, help="address to bind (default: Streamlit's)")
    args = parser.parse_args(argv)
    for d in args.dirs:
        if not os.path.isdir(d):
            parser.error(f"{d}: no such directory")
    cmd = [sys.executable, "-m", "streamlit", "run", str(app_path())]
    if args.port:
        cmd += ["--server.port", str(args.port)]
    if args.host:
        cmd += ["--server.address", args.host]
    cmd += ["--", *[os.path.abspath(d) for d in args.dirs]]
    os.chdir(app_path().parent)  # so .streamlit/config.toml applies
    os.execv(sys.executable, cmd)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
