"""`rundash [DIR ...]` starts the same app with the directories after `--`."""
from __future__ import annotations

import os
import sys

import pytest

from rundash_core import cli, launch


def test_cli_runs_streamlit_on_app_py_with_dirs(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(os, "execv", lambda exe, argv: calls.append((exe, argv)))
    monkeypatch.chdir(tmp_path)
    cli.main([str(tmp_path), "--port", "8612", "--host", "127.0.0.1"])
    exe, argv = calls[0]
    assert exe == sys.executable
    assert argv[1:4] == ["-m", "streamlit", "run"] and argv[4] == str(launch.app_path())
    assert argv[argv.index("--server.port") + 1] == "8612"
    assert argv[argv.index("--server.address") + 1] == "127.0.0.1"
    assert argv[argv.index("--") + 1:] == [str(tmp_path)]
    assert os.getcwd() == str(launch.app_path().parent)  # .streamlit/config.toml applies


def test_cli_rejects_a_missing_directory(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(os, "execv", lambda *a: pytest.fail("must not start"))
    with pytest.raises(SystemExit):
        cli.main([str(tmp_path / "nope")])
    assert "no such directory" in capsys.readouterr().err
