"""An independent reading of SWE-Lego-RL validation on the sample run (tests/data/lego-val),
written from the format notes (swe-lego-rl.md sections 6-8), not from rundash's code: a task's
first copy is its smallest path, the cohort is the tasks in at least half the events."""
from __future__ import annotations

import re
from pathlib import Path

from helpers import DATA

EXP = "qwen3-8b-swegym-gspo-async-r1"
VAL_DATA = DATA / "lego-val"
VAL_LOG = VAL_DATA / "logs" / f"{EXP}.log"
VAL_TRIALS = VAL_DATA / "harbor_trials" / "swe_lego_rl" / EXP


def ref_first_copies(trials: Path, folders: list[str]) -> dict[str, dict[str, Path]]:
    """Per dump folder: task -> its first copy (smallest path)."""
    out = {}
    for f in folders:
        firsts: dict[str, Path] = {}
        for t in sorted((trials / f).iterdir()):
            firsts.setdefault(re.sub(r"-[0-9a-f]{6,}$", "", t.name), t)
        out[f] = firsts
    return out


def ref_cohort(firsts: dict) -> list[str]:
    """The fixed cohort: tasks in at least half the dump folders."""
    counts: dict[str, int] = {}
    for tasks in firsts.values():
        for t in tasks:
            counts[t] = counts.get(t, 0) + 1
    return sorted(t for t, c in counts.items() if 2 * c >= len(firsts))


def trial_reward(trial: Path) -> float:
    """A Harbor trial's reward (verifier/reward.txt; none written: 0)."""
    return float((trial / "verifier" / "reward.txt").read_text().strip()) if (trial / "verifier" / "reward.txt").exists() else 0.0
