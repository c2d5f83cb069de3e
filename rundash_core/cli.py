"""`rundash [DIR ...]`: start the dashboard on directories (or on the built-in demo)."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def app_path() -> Path:
    """app.py of this checkout (rundash is installed from its source tree: `pip install -e .`)."""
    path = Path(__file__).resolve().parent.parent / "app.py"
    if not path.exists():
        raise SystemExit(f"rundash: cannot find app.py next to the rundash_core package ({path})")
    return path


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
