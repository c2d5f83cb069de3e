"""The demo verl run's validation generation dumps (`docs/formats/verl.md` section 11): what
verl writes with `trainer.validation_data_dir=val_generations`, a few samples per validation.

`dumped_generations` writes `<log folder>/val_generations/<step>.jsonl` (rows `{input, output, gts,
score, step, acc, pred, reward}`: validation dumps always add `reward`) and returns the console
line verl prints after it, `Dumped generations to val_generations/<step>.jsonl`.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from rundash_core.demo.curves import SEED

FOLDER = "val_generations"
_TEMPLATE = "system\nYou are a helpful assistant.\nuser\n{q}\nassistant\n"
_QUESTIONS = (
    ("Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many "
     "clips did Natalia sell altogether in April and May? Let's think step by step and output the final answer "
     "after \"####\".", "Natalia sold 48 / 2 = 24 clips in May.\nAltogether she sold 48 + 24 = 72 clips.\n#### {a}",
     "72"),
    ("Janet’s ducks lay 16 eggs per day. She eats three for breakfast every morning and bakes muffins for her "
     "friends every day with four. She sells the remainder at the farmers' market daily for $2 per fresh duck egg. "
     "How much in dollars does she make every day at the farmers' market? Let's think step by step and output the "
     "final answer after \"####\".", "She has 16 - 3 - 4 = 9 eggs left.\nShe makes 9 * 2 = $18.\n#### {a}", "18"),
    ("How many vertical asymptotes does the graph of $y=\\frac{2}{x^2+x-6}$ have? Let's think step by step and "
     "output the final answer within \\boxed{}.", "The denominator factors as $(x-2)(x+3)$.\n<think>Both roots "
     "leave the numerator non-zero.</think>\nSo the graph has $\\boxed{{a}}$ vertical asymptotes.", "2"),
)
_WRONG = {"72": "96", "18": "22", "2": "1"}


def dumped_generations(pfx: str, log_folder: Path, step: int, t: float) -> str:
    """Write the validation dump of `step` (mtime `t`) and return verl's console line for it."""
    rng = np.random.default_rng([SEED, 23, step])
    p_right = min(0.95, 0.45 + step / 200)
    rows = []
    for q, answer, gt in _QUESTIONS:
        right = bool(rng.random() < p_right)
        pred = gt if right else _WRONG[gt]
        score = 1.0 if right else 0.0
        rows.append({"input": _TEMPLATE.format(q=q), "output": answer.replace("{a}", pred), "gts": gt,
                     "score": score, "step": step, "acc": right, "pred": pred, "reward": score})
    folder = log_folder / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{step}.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    os.utime(path, (t, t))
    return f"{pfx}Dumped generations to {FOLDER}/{step}.jsonl\n"
