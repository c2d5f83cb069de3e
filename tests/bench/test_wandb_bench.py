"""The W&B load benchmark at a tiny scale: the generated run reads as the independent reader reads
it, a refresh takes exactly the appended values, and the report says so."""
from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from benchmarks import wandb_load  # noqa: E402

pytest.importorskip("wandb.proto.wandb_internal_pb2")


def test_tiny_wandb_benchmark_verifies_and_reports(tmp_path):
    text, checks, payload = wandb_load.report(str(tmp_path), rows=300, appended=40, repeat=1, in_process=True)
    best = payload["best"]
    assert checks["verified"], best["verify"]
    assert best["verify"]["tidy_rows"] == 300 * len(wandb_load.KEYS) == best["verify"]["independent_rows"]
    assert best["refresh"]["rows_added"] == 40 * len(wandb_load.KEYS)
    assert best["decode"]["records"] == 2 * 300 + 1  # a history and a summary record a row, the run record
    assert "rundash cold load" in text and "refresh +40 rows" in text and "PASS" in text
