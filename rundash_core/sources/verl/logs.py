"""The log files of a verl / SWE-Lego-RL run: its console log ("console"), and the vLLM
throughput sidecar `<exp>_vllm.log` next to it when there is one ("inference")."""
from __future__ import annotations

import os

import pandas as pd

from rundash_core import frames
from rundash_core.io.files import file_id
from rundash_core.logs.reading import file_row
from rundash_core.sources.verl.overview import stem


def list_logs(log_path: str | None) -> pd.DataFrame:
    if log_path is None:
        return frames.empty(frames.LOGS)
    rows = [file_row(log_path, "console", None)]
    sidecar = os.path.join(os.path.dirname(log_path), stem(log_path) + "_vllm.log")
    if file_id(sidecar) is not None:
        rows.append(file_row(sidecar, "inference", None))
    return frames.typed(rows, frames.LOGS)
