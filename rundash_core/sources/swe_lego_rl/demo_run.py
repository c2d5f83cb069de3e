"""The SWE-Lego-RL demo run (`docs/formats/swe-lego-rl.md`): a fully-async verl console log and
the Harbor trial dirs its agent loop wrote, `harbor_trials/<project>/<exp>/step_NNNN/<task>-<hex8>/`.

The story, a short finished run (GSPO, Qwen3-8B on SWE-Gym tasks, n=4, 4 prompts per trainer step):

- `step_NNNN` folders are numbered by the rollouter's sample counter, not the trainer step. Each
  training folder holds the n=4 trials of one task; trainer step k consumes 4 folders. Only the
  folders of the first and the last three trainer steps are kept on disk (epochs 0 and 3 of the
  same 12 tasks), as a cleaned-up run would keep them. The log's launch lines say when a folder
  was generated, not which trainer step consumed it, so the dashboard shows these by "Harbor step
  folder" (2–13, a gap, 39–50), never by a guessed step; the card's "12 of 12" counts trainer steps.
- Three complete validation dumps of the same 12-task cohort at n=1 (before training, after step
  6, after the last step). Each starts in the log with `test_gen_batch meta info: {… 'validate':
  True, 'global_steps': X}` and ends with `step:T - val-core/unknown/reward/mean@1:… -
  rollouter/validate_time:…`, which pairs folder `step_{X:04d}` with trainer step T. The logged
  val score is solved/12 of the dump on disk.
- A few trials never started their container: `exception.txt` and `exception_info`, no
  trajectory, no verifier output, no reward.
- The log names the trial folders by absolute path (`… trials_dir=<root>/harbor_trials/…/step_N`),
  which is how a log that does not sit in a `logs/` folder is linked to its trials (spec 1.3).

Files: `result.json` (Harbor TrialResult), `config.json`, `trial.log`, a minimal ATIF
`agent/trajectory.json`, `verifier/reward.txt`, `verifier/test-stdout.txt` (training) or
`verifier/report.json` (validation). Deterministic for a given end time and output path.
The story's constants and the trial dirs are written by `lego_trials`, the logs by `lego_log`.
"""
from __future__ import annotations

from pathlib import Path

from rundash_core.demo.run_files import RunFiles
from rundash_core.sources.swe_lego_rl.demo_log import write_log, write_vllm_log
from rundash_core.sources.swe_lego_rl.demo_trials import (  # noqa: F401 (the story's constants, as before)
    HEAD_IP,
    KEPT_STEPS,
    MODEL,
    PROJECT,
    PROMPTS,
    SALT,
    SYSTEM,
    TOTAL,
    TRAIN_FAILED,
    TRAIN_TASKS,
    VAL_AFTER,
    VAL_FAILED,
    VAL_SOLVED,
    VAL_TASKS,
    WORKER_IP,
    N,
    Trial,
    demo_rng,
    train_folders,
    train_p,
    val_folder,
    write_trial,
)


def write_lego_run(out: Path, exp: str, t_end: float, *, log_rel: str, root: Path) -> tuple[Path, Path]:
    """Write the console log (at `out/log_rel`, mtime `t_end`) and the trial tree under
    `out/harbor_trials/`. `root` is where `out` will finally live: the log names trial folders by
    absolute path there. Returns (log path, exp dir)."""
    rng = demo_rng(0)
    step_s = [float(x) for x in rng.uniform(1500, 2100, TOTAL + 1)]
    val_s = [float(x) for x in rng.uniform(860, 960, len(VAL_AFTER))]
    startup = 1150.0
    span = startup + sum(step_s[1:]) + sum(val_s) + 60.0
    t0 = t_end - span
    # the clock of the run: when each trainer step and each validation ends
    step_end, val_end = {}, {}
    t = t0 + startup
    for e, after in enumerate(VAL_AFTER):
        if after == 0:
            t += val_s[e]
            val_end[e] = t
    for s in range(1, TOTAL + 1):
        t += step_s[s]
        step_end[s] = t
        for e, after in enumerate(VAL_AFTER):
            if after == s:
                t += val_s[e]
                val_end[e] = t
    trials_root = str(root / "harbor_trials" / PROJECT / exp)
    f = RunFiles(out / "harbor_trials")
    rel_exp = f"{PROJECT}/{exp}"
    by_step: dict[int, list[Trial]] = {}
    for s in KEPT_STEPS:
        for p, folder in enumerate(train_folders(s)):
            ti = ((s - 1) * PROMPTS + p) % len(TRAIN_TASKS)
            task, logit, path = TRAIN_TASKS[ti]
            trng = demo_rng(s, p, 2)
            for r in range(N):
                start = step_end[s] - step_s[s] - 600 + trng.uniform(0, step_s[s] * 0.5)
                ok = (s, p, r) not in TRAIN_FAILED
                reward = float(trng.random() < train_p(logit, s)) if ok else None
                tr = Trial(folder, task, path, reward, start, start + trng.uniform(260, 1500), False)
                write_trial(f, rel_exp, trials_root, tr, trng)
                by_step.setdefault(s, []).append(tr)
    val_trials: dict[int, list[Trial]] = {}
    for e in range(len(VAL_AFTER)):
        vrng = demo_rng(100 + e)
        begin = val_end[e] - val_s[e]
        for i, (task, path) in enumerate(VAL_TASKS):
            failed = i in VAL_FAILED[e]
            reward = None if failed else float(i in VAL_SOLVED[e])
            start = begin + vrng.uniform(5, 60)
            tr = Trial(val_folder(e), task, path, reward, start, min(start + vrng.uniform(250, 800), val_end[e] - 20), True)
            write_trial(f, rel_exp, trials_root, tr, vrng)
            val_trials.setdefault(e, []).append(tr)
    f.finish()
    log = out / log_rel
    write_log(log, exp, t0, step_end, val_end, step_s, val_s, by_step, val_trials, trials_root, t_end)
    write_vllm_log(log.with_name(f"{exp}_vllm.log"), t0, t_end)
    return log, out / "harbor_trials" / PROJECT / exp
