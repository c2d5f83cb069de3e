"""The code passes the linter configured in pyproject.toml ([tool.ruff])."""
from __future__ import annotations

import shutil
import subprocess
import sys

from helpers import REPO


def test_ruff_finds_nothing():
    ruff = shutil.which("ruff") or shutil.which("ruff", path=str(REPO / ".venv" / "bin"))
    cmd = [ruff] if ruff else [sys.executable, "-m", "ruff"]
    res = subprocess.run([*cmd, "check", "--no-cache", "--output-format", "concise", "."], cwd=REPO,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
