"""The rollout panels' numbers, from the samples frame (`frames.SAMPLES`) and the metric names: how
rollouts ended, which groups gave GRPO no signal, per-step episode shape, the per-task grid, and the
keys of the token / importance-sampling panel. No file I/O: inputs are frames.

Definitions follow the SWE-Lego-RL dashboard (spec swe-lego-rl.md 5.1, 5.2): a rollout is correct
when its reward is above 0; a group (the samples of one prompt) with every rollout right or every
one wrong has zero GRPO advantage: no signal.

Steps: the panels and the Trajectory page count by one step axis per run (`step_axis`): trainer
steps where every sample has one, else the Harbor folder numbers, labelled "Harbor step folder"
(a fully-async SWE-Lego-RL run's training folders have no known trainer step, SWE-Lego-RL spec 2.1).
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

OUTCOMES = ("completed", "truncated", "aborted", "pending", "error")  # the order of the stacked bars
_ABORTED = re.compile(r"abort|cancel", re.I)
_PENDING = re.compile(r"pending|in flight|running", re.I)
_TRUNCATED = re.compile(r"truncat|length|max_tokens|max_turns|overlong|context", re.I)
STEP, STEP_FOLDER = "step", "step_folder"
FOLDER_LABEL = "Harbor step folder"


def step_axis(samples: pd.DataFrame) -> tuple[str, str]:
    """(column, label) of the run's step axis: ('step', 'step') when every sample filed under a
    Harbor folder has its trainer step; else ('step_folder', 'Harbor step folder'), so one axis
    never mixes trainer steps with folder numbers and no step is guessed."""
    if STEP_FOLDER in samples.columns and (samples[STEP_FOLDER].notna() & samples[STEP].isna()).any():
        return STEP_FOLDER, FOLDER_LABEL
    return STEP, STEP


def on_axis(samples: pd.DataFrame, column: str) -> pd.DataFrame:
    """The samples with `step` holding their value on the axis (`step_axis`), for the per-step
    numbers below."""
    return samples if column == STEP else samples.assign(step=samples[column])


def with_gaps(per_step: pd.DataFrame) -> pd.DataFrame:
    """A per-step frame with one empty row at the first missing step after each run of consecutive
    steps (sorted by step), so a line drawn over it breaks there: steps 13 then 39 are a gap, not a
    line across 26 steps nobody measured."""
    steps = pd.Series(per_step["step"].dropna().astype("int64").unique()).sort_values()
    holes = (steps + 1)[steps.diff(-1).lt(-1).to_numpy()] if len(steps) > 1 else steps.iloc[:0]
    if holes.empty:
        return per_step
    gaps = pd.DataFrame({"step": holes.to_numpy()})
    out = pd.concat([per_step.astype({"step": "int64"}), gaps], ignore_index=True)
    return out.sort_values("step", kind="stable").reset_index(drop=True)


def _error_type(error: object) -> str:
    """A short type for an error text: its exception name (`TimeoutError: …` → TimeoutError), else
    its first words."""
    text = str(error).strip()
    head = re.match(r"([A-Za-z_][\w.]*(?:Error|Exception|Timeout|Exit))\b", text)
    if head:
        return head.group(1).rsplit(".", 1)[-1]
    return " ".join(text.split()[:3])[:40] or "error"


def grid_with_gaps(grid: pd.DataFrame) -> pd.DataFrame:
    """A task × step grid (`task_grid`) with one empty column at the first missing step after each
    run of consecutive steps, so the heatmap shows where steps are missing (its axis is by category)."""
    if grid.empty:
        return grid
    holes = with_gaps(pd.DataFrame({"step": list(grid.columns)}))["step"]
    return grid.reindex(columns=[int(c) for c in holes])


def outcome(samples: pd.DataFrame) -> pd.Series:
    """How each rollout ended: one of `OUTCOMES`, or `error: <type>` when it raised or names an error."""
    status = samples["status"].astype("str").fillna("")
    error = samples["error"].astype(object)
    named = error.map(lambda e: isinstance(e, str) and bool(e.strip()))
    failed = samples["ok"].eq(False).fillna(False).astype(bool) | named
    truncated = samples["truncated"].eq(True).fillna(False).astype(bool) | status.str.contains(_TRUNCATED)
    out = pd.Series("completed", index=samples.index, dtype=object)
    out[truncated] = "truncated"
    out[status.str.contains(_PENDING)] = "pending"
    out[status.str.contains(_ABORTED)] = "aborted"
    kinds = [("error: " + _error_type(e)) if isinstance(e, str) and e.strip() else
             ("error: " + s if s and s not in ("failed", "error") else "error")
             for e, s in zip(error[failed], status[failed])]
    out[failed] = kinds
    return out


def outcomes_by_step(samples: pd.DataFrame) -> pd.DataFrame:
    """Tidy counts: step, split, outcome, n (rows with a step only)."""
    s = samples[samples["step"].notna()]
    if s.empty:
        return pd.DataFrame({"step": pd.array([], dtype="Int64"), "split": [], "outcome": [], "n": []})
    out = s.assign(outcome=outcome(s)).groupby(["step", "split", "outcome"], dropna=False).size()
    return out.rename("n").reset_index()


def groups(samples: pd.DataFrame) -> pd.DataFrame:
    """One row per group of rollouts of one prompt at one step: step, group_id, n, correct (rewards
    above 0), reward_min/mean/max/std, zero_advantage (every advantage is 0), no_signal (all right
    or all wrong, at least two rollouts)."""
    s = samples[samples["group_id"].notna() & samples["reward"].notna()]
    if s.empty:
        return pd.DataFrame(columns=["step", "split", "group_id", "n", "correct", "reward_min", "reward_mean",
                                     "reward_max", "reward_std", "zero_advantage", "no_signal"])
    s = s.assign(correct=s["reward"] > 0, adv0=s["advantage"].fillna(np.nan).eq(0))
    g = s.groupby(["step", "split", "group_id"], dropna=False, sort=True)
    out = pd.DataFrame({
        "n": g.size(), "correct": g["correct"].sum(),
        "reward_min": g["reward"].min(), "reward_mean": g["reward"].mean(),
        "reward_max": g["reward"].max(), "reward_std": g["reward"].std(ddof=0),
        "zero_advantage": g["adv0"].all() & g["advantage"].count().gt(0),
    }).reset_index()
    out["no_signal"] = (out["n"] >= 2) & ((out["correct"] == 0) | (out["correct"] == out["n"]))
    return out


def correct_of_n(group_frame: pd.DataFrame) -> dict:
    """The correct-out-of-n histogram over the train groups of the most common size n:
    {n, histogram (list, bins 0..n), groups, no_signal (share), mean_solve_rate}; {} without groups."""
    train = group_frame[(group_frame["split"] == "train") & (group_frame["n"] >= 2)]
    if train.empty:
        return {}
    n = int(train["n"].mode().iloc[0])
    same = train[train["n"] == n]
    hist = np.bincount(same["correct"].astype(int), minlength=n + 1)[: n + 1]
    return {"n": n, "histogram": hist.tolist(), "groups": int(len(same)),
            "other_sizes": int(len(train) - len(same)),
            "no_signal": float((hist[0] + hist[n]) / len(same)),
            "mean_solve_rate": float((same["correct"] / n).mean())}


def signal_by_step(group_frame: pd.DataFrame) -> pd.DataFrame:
    """Per step (train groups): groups, no_signal share, zero-advantage share, mean solve rate."""
    train = group_frame[(group_frame["split"] == "train") & (group_frame["n"] >= 2)]
    if train.empty:
        return pd.DataFrame(columns=["step", "groups", "no_signal", "zero_advantage", "solve_rate"])
    g = train.assign(rate=train["correct"] / train["n"]).groupby("step", sort=True)
    return pd.DataFrame({"groups": g.size(), "no_signal": g["no_signal"].mean(),
                         "zero_advantage": g["zero_advantage"].mean(), "solve_rate": g["rate"].mean()}).reset_index()


def episodes_by_step(samples: pd.DataFrame) -> pd.DataFrame:
    """Per step and split: samples, mean turns, output tokens (mean, p90), input tokens (mean),
    mean duration, and the shares that were truncated or raised."""
    s = samples[samples["step"].notna()]
    if s.empty:
        return pd.DataFrame(columns=["step", "split", "samples", "turns", "output_tokens", "output_tokens_p90",
                                     "input_tokens", "duration_s", "truncated", "errors"])
    ends = outcome(s)
    s = s.assign(_trunc=ends.eq("truncated"), _err=ends.str.startswith("error"),
                 _out=s["output_tokens"].astype("float64"), _in=s["input_tokens"].astype("float64"),
                 _turns=s["turns"].astype("float64"))
    g = s.groupby(["step", "split"], sort=True, dropna=False)
    return pd.DataFrame({
        "samples": g.size(), "turns": g["_turns"].mean(), "output_tokens": g["_out"].mean(),
        "output_tokens_p90": g["_out"].quantile(0.9), "input_tokens": g["_in"].mean(),
        "duration_s": g["duration_s"].mean(), "truncated": g["_trunc"].mean(), "errors": g["_err"].mean(),
    }).reset_index()


def task_grid(samples: pd.DataFrame, *, split: str = "train") -> tuple[pd.DataFrame, pd.DataFrame]:
    """(grid, tasks): grid is task × step of solve rates (share of rollouts with reward above 0; NaN
    where the task was not rolled out); tasks is one row per task: epochs, rollouts, solve_rate,
    first_rate, last_rate, delta (NaN with fewer than two epochs), sorted by solve rate."""
    s = samples[(samples["split"] == split) & samples["task_id"].notna() & samples["step"].notna()
                & samples["reward"].notna()]
    if s.empty:
        return pd.DataFrame(), pd.DataFrame(columns=["task_id", "epochs", "rollouts", "solve_rate", "first_rate",
                                                     "last_rate", "delta"])
    s = s.assign(solved=(s["reward"] > 0).astype(float), step=s["step"].astype(int))
    epochs = s.groupby(["task_id", "step"], sort=True)["solved"].agg(["mean", "size"]).reset_index()
    grid = epochs.pivot(index="task_id", columns="step", values="mean")
    g = epochs.groupby("task_id", sort=False)
    tasks = pd.DataFrame({
        "epochs": g.size(), "rollouts": g["size"].sum(),
        "solve_rate": s.groupby("task_id")["solved"].mean(),
        "first_rate": g["mean"].first(), "last_rate": g["mean"].last(),
    })
    tasks["delta"] = (tasks["last_rate"] - tasks["first_rate"]).where(tasks["epochs"] >= 2)
    tasks = tasks.reset_index().sort_values(["solve_rate", "task_id"], kind="stable").reset_index(drop=True)
    return grid.loc[tasks["task_id"]], tasks


def cell_samples(samples: pd.DataFrame, grid: pd.DataFrame, cell: tuple[int, int | str], *,
                 split: str = "train") -> tuple[str, int, pd.DataFrame]:
    """The rollouts behind one task-grid cell (row position, column label as the table shows it):
    (task, step, its samples, best reward first)."""
    row, col = cell
    task, step = grid.index[int(row)], int(col)
    keep = (samples["task_id"] == task) & (samples["step"] == step) & (samples["split"] == split)
    picked = samples[keep.fillna(False).astype(bool)]
    return task, step, picked.sort_values("reward", ascending=False, kind="stable").reset_index(drop=True)


def grid_totals(tasks: pd.DataFrame) -> dict[str, int]:
    """never solved, always solved, seen in several epochs, improved, regressed."""
    return {"tasks": int(len(tasks)), "never_solved": int((tasks["solve_rate"] == 0).sum()),
            "always_solved": int((tasks["solve_rate"] == 1).sum()),
            "multi_epoch": int((tasks["epochs"] >= 2).sum()),
            "improved": int((tasks["delta"] > 0).sum()), "regressed": int((tasks["delta"] < 0).sum())}


# Token & IS: does the rollout engine agree with the trainer on token probabilities? (key patterns of
# verl's rollout correction, prime-rl's mismatch KL / IS masks, SWE-Lego-RL's probs diff)
TOKEN_IS_PANELS = {
    "Trainer vs inference KL": r"^(rollout_corr/(kl|k3_kl)|mismatch_kl/all/(mean|max)|masked_mismatch_kl/all/mean"
                               r"|actor/ppo_kl)$",
    "Log-ppl difference": r"^rollout_corr/(log_ppl_diff|log_ppl_abs_diff|log_ppl_diff_(p50|p90|p99|max|min))$",
    "Tokens beyond bounds": r"^(rollout_corr/(log_ppl_diff_gt[12]_frac|rollout_is_ratio_fraction_(high|low)"
                            r"|rollout_is_seq_fraction_(high|low)|rollout_rs_masked_fraction)|is_masked/all/mean"
                            r"|actor/pg_clipfrac)$",
    "Importance weights": r"^rollout_corr/(rollout_is_(mean|max|min|std)|rollout_is_eff_sample_size"
                          r"|chi2_token|chi2_seq|ppl_ratio)$",
    "Probability agreement": r"^training/rollout_(actor_probs_pearson_corr|probs_diff_\w+)$",
    "Perplexity": r"^rollout_corr/(training_ppl|rollout_ppl)$",
}


def token_is_panels(keys) -> dict[str, list[str]]:
    """The Token & IS panels this run can draw: title -> its logged keys (in key order)."""
    keys = sorted(set(keys))
    out = {}
    for title, pattern in TOKEN_IS_PANELS.items():
        found = [k for k in keys if re.match(pattern, k)]
        if found:
            out[title] = found
    return out
