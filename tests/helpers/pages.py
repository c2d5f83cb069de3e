"""What an AppTest page showed, read back: its Plotly charts (by title, legend lines, decoded
arrays), the Metrics page's sections, code blocks, the Trajectory page's sample table (the pages
are opened by `helpers.open_page`)."""
from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd

import rundash_core as rd


def charts_by_title(at) -> dict[str, dict]:
    """Every Plotly chart of an AppTest page, by its title (the spec Streamlit would send)."""
    out = {}
    for f in at.get("plotly_chart"):
        spec = json.loads(f.proto.spec)
        out[spec["layout"]["title"]["text"]] = spec
    return out


def legend_lines(spec: dict) -> dict[str, dict]:
    """A chart's traces that show in its legend, by name."""
    return {t["name"]: t for t in spec["data"] if t.get("showlegend", True) is not False}


def figures(at) -> list[dict]:
    """Every Plotly chart spec of an AppTest page, in page order."""
    return [json.loads(f.proto.spec) for f in at.get("plotly_chart")]


def section_labels(at) -> list[str]:
    """The Metrics page's section names (its bold expander labels), unescaped."""
    return [re.sub(r"\\(.)", r"\1", e.label.split("**")[1]) for e in at.expander if e.label.startswith("**")]


def plotly_values(v) -> np.ndarray:
    """Plotly sends numpy arrays base64-encoded (`{"dtype", "bdata"}`)."""
    if isinstance(v, dict):
        import base64

        return np.frombuffer(base64.b64decode(v["bdata"]), dtype=np.dtype(v["dtype"]))
    return np.asarray(v, dtype=float)


def first_run_of_kind(runs, kind: str):
    """(run_id, opened Run) of the first row of `kind` in a runs list."""
    row = runs[runs["kind"] == kind].iloc[0]
    return row["run_id"], rd.open_run(row["path"], run_id=row["run_id"])


def code_values(at) -> list[str]:
    """The text of every st.code block of an AppTest page."""
    return [c.value.strip() for c in at.code]  # (st.code drops trailing whitespace)


def sample_table(at) -> pd.DataFrame:
    """The sample table: the dataframe that has a sample_id column."""
    tables = [d.value for d in at.dataframe if "sample_id" in getattr(d.value, "columns", [])]
    assert len(tables) == 1
    return tables[0]
