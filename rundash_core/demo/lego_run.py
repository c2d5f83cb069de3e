"""The SWE-Lego-RL demo run (`../shared/formats/swe-lego-rl.md`): a fully-async verl console log and
the Harbor trial dirs its agent loop wrote, `harbor_trials/<project>/<exp>/step_NNNN/<task>-<hex8>/`.

The story, a short finished run (GSPO, Qwen3-8B on SWE-Gym tasks, n=4, 4 prompts per trainer step):

- `step_NNNN` folders are numbered by the rollouter's sample counter, not the trainer step. Each
  training folder holds the n=4 trials of one task; trainer step k consumes 4 folders. Only the
  folders of the first and the last three trainer steps are kept on disk (epochs 0 and 3 of the
  same 12 tasks), as a cleaned-up run would keep them.
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
"""
from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .curves import SEED
from .run_files import RunFiles
from .verl_console import (f32, metric_line, npf, npi, pprint_lines, prefix, py, repeated, tqdm_bar,
                           validation_pprint)

PROJECT = "swe_lego_rl"
N = 4  # rollouts per prompt
PROMPTS = 4  # prompts per trainer step
TOTAL = 12  # trainer steps
VAL_AFTER = (0, 6, 12)  # trainer steps whose validation is dumped (0: before training)
KEPT_STEPS = (1, 2, 3, 10, 11, 12)  # trainer steps whose training folders are on disk
SALT = 12
MODEL = "hosted_vllm/qwen3-8b"
HEAD_IP, WORKER_IP = "10.0.3.11", "10.0.3.12"

# (task id, difficulty logit, file the fix goes in)
TRAIN_TASKS = [
    ("getmoto__moto-7365", 0.6, "moto/dynamodb/models/table.py"),
    ("pandas-dev__pandas-53958", -1.4, "pandas/core/reshape/merge.py"),
    ("python__mypy-15413", -2.2, "mypy/checkexpr.py"),
    ("iterative__dvc-5004", -0.3, "dvc/config.py"),
    ("conan-io__conan-13403", 0.9, "conans/client/cmd/new.py"),
    ("pydantic__pydantic-6043", -0.8, "pydantic/main.py"),
    ("dask__dask-10042", -1.0, "dask/dataframe/core.py"),
    ("facebookresearch__hydra-1915", 0.2, "hydra/_internal/utils.py"),
    ("bokeh__bokeh-13289", -2.6, "src/bokeh/models/renderers.py"),
    ("modin-project__modin-6780", -1.7, "modin/pandas/base.py"),
    ("Project-MONAI__MONAI-6756", -0.5, "monai/transforms/utils.py"),
    ("getmoto__moto-6212", 1.3, "moto/s3/responses.py"),
]
VAL_TASKS = [
    ("django__django-11099", "django/contrib/auth/validators.py"),
    ("astropy__astropy-12907", "astropy/modeling/separable.py"),
    ("sympy__sympy-20590", "sympy/core/_print_helpers.py"),
    ("pytest-dev__pytest-7432", "src/_pytest/skipping.py"),
    ("matplotlib__matplotlib-24149", "lib/matplotlib/axes/_axes.py"),
    ("scikit-learn__scikit-learn-13142", "sklearn/mixture/base.py"),
    ("sphinx-doc__sphinx-8595", "sphinx/ext/autodoc/__init__.py"),
    ("psf__requests-2317", "requests/sessions.py"),
    ("pylint-dev__pylint-7080", "pylint/lint/expand_modules.py"),
    ("pydata__xarray-4094", "xarray/core/dataarray.py"),
    ("django__django-13933", "django/forms/models.py"),
    ("sympy__sympy-18189", "sympy/solvers/diophantine.py"),
]
VAL_SOLVED = ({1, 4, 8}, {1, 4, 6, 8, 10}, {1, 3, 4, 6, 8, 11})  # per event: cohort indices solved
VAL_FAILED = ({}, {11: "start"}, {})  # per event: trials whose environment never started
TRAIN_FAILED = {(2, 1, 3), (11, 2, 0), (12, 0, 2)}  # (trainer step, prompt, rollout) that never started
SYSTEM = ("You are OpenHands agent, a helpful AI assistant that can interact with a computer to solve tasks. "
          "The repository is at /testbed. Make minimal changes to non-test files so that the issue is resolved.")


def _rng(*salt: int) -> np.random.Generator:
    return np.random.default_rng([SEED, SALT, *salt])


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int((t % 1) * 1e6):06d}Z"


def val_folder(event: int) -> int:
    """The rollouter counter of validation `event`: 1 before training, then one counter value
    after the folders of every trainer step so far (and after the earlier validations)."""
    return 1 + VAL_AFTER[event] * PROMPTS + event


def train_folders(step: int) -> list[int]:
    """The PROMPTS folder numbers trainer step `step` consumed."""
    before = sum(1 for e, s in enumerate(VAL_AFTER) if s < step)  # validations run before it
    first = 1 + before + (step - 1) * PROMPTS
    return list(range(first, first + PROMPTS))


@dataclass
class Trial:
    folder: int
    task: str
    path_in_repo: str
    reward: float | None  # None: never started
    started: float
    finished: float
    val: bool
    turns: int = 0
    name: str = ""
    out_tok: int = 0
    in_tok: int = 0
    files: dict[str, str] = field(default_factory=dict)


def _trajectory(rng: np.random.Generator, tr: Trial, issue: str) -> tuple[dict, int, int, int]:
    """A minimal ATIF-v1.5 trajectory: locate, read, edit, test, finish. Returns it with the summed
    prompt, completion and cached tokens."""
    fn = tr.path_in_repo.rsplit("/", 1)[-1].removesuffix(".py")
    line = int(rng.integers(80, 900))
    actions = [
        ("Let me locate the code the issue is about.", "I should find where this is implemented first.",
         "execute_bash", {"command": f"grep -rn \"def \" /testbed/{tr.path_in_repo} | head -5"},
         f"/testbed/{tr.path_in_repo}:{line}:    def {fn}_value(self, value):"),
        ("", "Now read the implementation around that line.", "str_replace_editor",
         {"command": "view", "path": f"/testbed/{tr.path_in_repo}", "view_range": [line - 4, line + 12]},
         f"Here's the result of running `cat -n` on /testbed/{tr.path_in_repo}:\n   {line}\t    def {fn}_value(self, "
         f"value):\n   {line + 1}\t        if value is None:\n   {line + 2}\t            return self.default"),
        ("The empty case is not handled; I'll fix it.", "The bug: an empty value falls through to the default.",
         "str_replace_editor", {"command": "str_replace", "path": f"/testbed/{tr.path_in_repo}",
                                "old_str": "        if value is None:", "new_str": "        if not value:"},
         f"The file /testbed/{tr.path_in_repo} has been edited."),
    ]
    if rng.random() < 0.6:
        actions.append(("Let me run the tests.", "Check that the change works.", "execute_bash",
                        {"command": "cd /testbed && python -m pytest -x -q 2>&1 | tail -3"},
                        "\x1b[32m1 passed\x1b[0m in 3.21s" if tr.reward else "\x1b[31m1 failed\x1b[0m, 12 passed in 4.87s"))
    actions.append(("I've made the fix.", "I think this is done.", "finish",
                    {"message": f"Handled the empty input in {fn}."}, None))
    t = tr.started + 35.0
    steps = [{"step_id": 1, "timestamp": _iso(tr.started + 1), "source": "system", "message": SYSTEM},
             {"step_id": 2, "timestamp": _iso(tr.started + 1), "source": "user", "message": issue}]
    ctx, p_sum, c_sum, cached_sum = 2600 + int(rng.integers(0, 400)), 0, 0, 0
    span = max(tr.finished - tr.started - 120.0, 60.0)
    for i, (msg, reasoning, tool, args, obs) in enumerate(actions):
        t += span / len(actions) * rng.uniform(0.6, 1.2)
        comp = int(rng.integers(30, 160))
        cached = int(ctx * 0.8) // 16 * 16
        call_id = "call_" + rng.bytes(12).hex()
        step = {"step_id": i + 3, "timestamp": _iso(t), "source": "agent", "model_name": MODEL, "message": msg,
                "reasoning_content": reasoning,
                "tool_calls": [{"tool_call_id": call_id, "function_name": tool, "arguments": args}]}
        if obs is not None:
            step["observation"] = {"results": [{"source_call_id": call_id, "content": obs}]}
        step["metrics"] = {"prompt_tokens": ctx, "completion_tokens": comp, "cached_tokens": cached}
        steps.append(step)
        p_sum, c_sum, cached_sum = p_sum + ctx, c_sum + comp, cached_sum + cached
        ctx += comp + int(rng.integers(60, 200))
    traj = {"schema_version": "ATIF-v1.5", "session_id": tr.name,
            "agent": {"name": "openhands-sdk", "version": "1.4.0", "model_name": MODEL}, "steps": steps,
            "final_metrics": {"total_prompt_tokens": p_sum, "total_completion_tokens": c_sum,
                              "total_cached_tokens": cached_sum, "total_steps": len(steps)}}
    tr.turns = len(actions)
    return traj, p_sum, c_sum, cached_sum


def _issue(task: str, path: str) -> str:
    fn = path.rsplit("/", 1)[-1].removesuffix(".py")
    return (f"<issue>\n{fn}: empty input raises instead of returning the default\n\nPassing an empty value to "
            f"`{fn}` raises an exception instead of falling back to the default (see `{path}`).\n</issue>")


_EXCEPTION = ("Traceback (most recent call last):\n"
              '  File "/opt/harbor/src/harbor/trial/trial.py", line 742, in _setup_environment\n'
              "    await asyncio.wait_for(self._environment.start(), timeout=timeout)\nTimeoutError\n\n"
              "The above exception was the direct cause of the following exception:\n\n"
              "harbor.environments.errors.EnvironmentStartTimeoutError: Environment failed to start within 600.0 seconds\n")


def _trial_files(f: RunFiles, rel_exp: str, trials_root: str, tr: Trial, rng: np.random.Generator) -> None:
    """Write one trial dir (paths relative to the RunFiles root)."""
    tr.name = f"{tr.task}-{rng.bytes(4).hex()}"
    rel = f"{rel_exp}/step_{tr.folder:04d}/{tr.name}"
    trials_dir = f"{trials_root}/step_{tr.folder:04d}"
    task_path = f"/mnt/shared/harbor_tasks/{'swe-bench-verified' if tr.val else 'swe-gym'}/{tr.task}"
    temperature = 0.6 if tr.val else 1.0
    config = {"task": {"path": task_path}, "trial_name": tr.name, "trials_dir": trials_dir,
              "agent": {"name": "openhands-sdk", "model_name": MODEL, "max_timeout_sec": 3600.0,
                        "kwargs": {"max_iterations": 100, "temperature": temperature}},
              "environment": {"type": "docker", "override_cpus": 2}, "verifier": {"override_timeout_sec": 1800.0}}
    result = {"id": str(uuid.UUID(bytes=rng.bytes(16), version=4)), "task_name": tr.task, "trial_name": tr.name,
              "trial_uri": f"file://{trials_dir}/{tr.name}", "task_id": {"path": task_path},
              "source": "swe-bench-verified" if tr.val else "swe-gym", "task_checksum": rng.bytes(32).hex(),
              "config": {**config, "timeout_multiplier": 1.0, "job_id": None},
              "agent_info": {"name": "openhands-sdk", "version": "1.4.0",
                             "model_info": {"name": "qwen3-8b", "provider": "hosted_vllm"}}}
    env_ready = tr.started + rng.uniform(12, 45)
    if tr.reward is None:
        t_exc = tr.started + 600.0 + rng.uniform(0, 5)
        tr.finished = t_exc + 1.0
        result.update({"agent_result": None, "verifier_result": None, "verifier_environment_mode": None,
                       "exception_info": {"exception_type": "EnvironmentStartTimeoutError",
                                          "exception_message": "Environment failed to start within 600.0 seconds",
                                          "exception_traceback": _EXCEPTION, "occurred_at": _iso(t_exc)},
                       "started_at": _iso(tr.started), "finished_at": _iso(tr.finished),
                       "environment_setup": {"started_at": _iso(tr.started), "finished_at": None},
                       "agent_setup": None, "agent_execution": None, "verifier": None, "step_results": None})
        f.text(f"{rel}/exception.txt", _EXCEPTION, tr.finished)
        f.text(f"{rel}/trial.log", f"{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(tr.started))} INFO Starting trial "
                                   f"{tr.name}\n{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(t_exc))} ERROR "
                                   "Environment failed to start within 600.0 seconds\n", tr.finished)
    else:
        traj, p_sum, c_sum, cached = _trajectory(rng, tr, _issue(tr.task, tr.path_in_repo))
        tr.in_tok, tr.out_tok = p_sum, c_sum
        agent_start = env_ready + 3.0
        agent_end = tr.finished - rng.uniform(60, 110)
        usage = {"n_input_tokens": p_sum, "n_cache_tokens": cached, "n_output_tokens": c_sum, "cost_usd": None}
        result.update({"agent_result": {**usage, "model_usage": {MODEL: usage}, "rollout_details": None,
                                        "metadata": None},
                       "verifier_result": {"rewards": {"reward": float(tr.reward)}}, "verifier_environment_mode": None,
                       "exception_info": None, "started_at": _iso(tr.started), "finished_at": _iso(tr.finished),
                       "environment_setup": {"started_at": _iso(tr.started), "finished_at": _iso(env_ready)},
                       "agent_setup": {"started_at": _iso(env_ready), "finished_at": _iso(agent_start)},
                       "agent_execution": {"started_at": _iso(agent_start), "finished_at": _iso(agent_end)},
                       "verifier": {"started_at": _iso(agent_end + 1), "finished_at": _iso(tr.finished - 1)},
                       "step_results": None})
        f.text(f"{rel}/agent/trajectory.json", json.dumps(traj, indent=2, ensure_ascii=False) + "\n", agent_end)
        f.text(f"{rel}/verifier/reward.txt", f"{int(tr.reward)}\n", tr.finished - 1)
        solved = bool(tr.reward)
        if tr.val:
            test = f"tests/test_{tr.path_in_repo.rsplit('/', 1)[-1].removesuffix('.py')}.py"
            report = {tr.task: {"patch_is_None": False, "patch_exists": True, "patch_successfully_applied": True,
                                "resolved": solved,
                                "tests_status": {"FAIL_TO_PASS": {"success": [f"{test}::test_empty_value"] if solved else [],
                                                                  "failure": [] if solved else [f"{test}::test_empty_value"]},
                                                 "PASS_TO_PASS": {"success": [f"{test}::test_basic"], "failure": []}}}}
            f.text(f"{rel}/verifier/report.json", json.dumps(report, indent=4) + "\n", tr.finished - 1)
        else:
            secs = rng.uniform(3, 60)
            f.text(f"{rel}/verifier/test-stdout.txt",
                   f"============ {'1 passed' if solved else '1 failed'} in {secs:.2f}s ============\n", tr.finished - 1)
        stamp = lambda x: time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(x))  # noqa: E731
        f.text(f"{rel}/trial.log", f"{stamp(tr.started)} INFO Starting trial {tr.name}\n{stamp(env_ready)} INFO "
                                   f"Environment ready\n{stamp(tr.finished)} INFO Trial finished\n", tr.finished)
    f.text(f"{rel}/config.json", json.dumps(config, indent=4) + "\n", tr.started)
    f.text(f"{rel}/result.json", json.dumps(result, indent=4) + "\n", tr.finished)


def _train_p(task_logit: float, step: int) -> float:
    return float(1 / (1 + np.exp(-(task_logit - 0.4 + 0.12 * step))))


def _step_metrics(step: int, t_step: float, trials: list[Trial] | None) -> list[tuple[str, str]]:
    """The fully-async trainer's metric line of one step (values as the Lego sample prints them)."""
    rng = _rng(step, 1)
    if trials:
        scored = [t.reward for t in trials if t.reward is not None]
        score = float(np.mean(scored)) if scored else 0.0
        turns = [t.turns for t in trials if t.reward is not None] or [0]
        failed = sum(t.reward is None for t in trials)
    else:
        score = float(np.mean([_train_p(x[1], step) for x in TRAIN_TASKS]) + rng.normal(0, 0.04))
        turns, failed = list(rng.integers(3, 6, 14)), int(rng.random() < 0.15)
    n = PROMPTS * N
    resp = 9000 + 450 * step + rng.normal(0, 600)
    items = [("training/global_step", str(step)), ("training/epoch", str((step - 1) * PROMPTS // len(TRAIN_TASKS))),
             ("global_seqlen/min", str(int(rng.uniform(90_000, 110_000)))),
             ("global_seqlen/max", str(int(rng.uniform(130_000, 160_000)))),
             ("global_seqlen/mean", py(rng.uniform(115_000, 125_000))),
             ("actor/entropy", f32(0.45 - 0.012 * step + rng.normal(0, 0.02))),
             ("actor/pg_loss", npf(rng.normal(0.005, 0.002))), ("actor/pg_clipfrac", npf(abs(rng.normal(0.0016, 0.0008)))),
             ("actor/ppo_kl", npf(rng.normal(-1.2e-05, 6e-06))),
             ("actor/pg_clipfrac_lower", npf(abs(rng.normal(7e-05, 2e-05)))),
             ("actor/grad_norm", npf(rng.uniform(0.1, 0.3))), ("actor/lr", npf(1e-06)),
             ("perf/mfu/actor", npf(rng.uniform(0.13, 0.28))),
             ("perf/max_memory_allocated_gb", npf(55.2 + rng.uniform(-0.4, 0.4))),
             ("perf/max_memory_reserved_gb", npf(76.4 + rng.uniform(-0.2, 0.2))),
             ("perf/cpu_memory_used_gb", npf(231.6 + rng.uniform(-2, 2))),
             ("critic/score/mean", py(score)), ("critic/score/max", "1.0"), ("critic/score/min", "0.0"),
             ("critic/rewards/mean", py(score)), ("critic/rewards/max", "1.0"), ("critic/rewards/min", "0.0"),
             ("critic/advantages/mean", f32(rng.normal(0, 0.002))), ("critic/advantages/max", f32(rng.uniform(1.2, 1.5))),
             ("critic/advantages/min", f32(-rng.uniform(1.2, 1.5))),
             ("response_length/mean", py(resp)), ("response_length/max", "32768.0"),
             ("response_length/min", py(rng.uniform(2000, 3000))),
             ("response_length/clip_ratio", py(max(0.0, rng.normal(0.03, 0.015)))),
             ("response/aborted_ratio", py(max(0.0, rng.normal(0.015, 0.01)))),
             ("prompt_length/mean", py(rng.uniform(2600, 2900))), ("prompt_length/max", "4071.0"),
             ("prompt_length/min", "1811.0"), ("prompt_length/clip_ratio", "0.0"),
             ("num_turns/min", npi(min(turns))), ("num_turns/max", npi(max(turns))),
             ("num_turns/mean", npf(float(np.mean(turns)))),
             ("tool_call_counts/min", npi(min(turns) - 1 if min(turns) else 0)), ("tool_call_counts/max", npi(max(turns) - 1)),
             ("tool_call_counts/mean", npf(max(float(np.mean(turns)) - 1, 0.0))),
             ("trajectory_filter/reason/agent_completed", str(n - failed)),
             ("trajectory_filter/reason/env_setup_failed", str(failed)),
             ("trajectory_filter/reason/timeout", "0"), ("trajectory_filter/reason/overlong", "0"),
             ("trajectory_filter/reason/max_turns_reached", "0"),
             ("trajectory_filter/invalid_count", str(failed)), ("trajectory_filter/invalid_ratio", py(failed / n))]
    harbor = {"env_setup": (8, 45, 125), "agent_setup": (1.7, 7.5, 17.5), "agent_execute": (175, 870, 1965),
              "agent_model_inference": (190, 610, 2200), "agent_tool_call": (44, 132, 465),
              "verifier": (10.6, 66.5, 132), "total": (273, 1195, 3037)}
    for name, (lo, mean, hi) in harbor.items():
        s = rng.uniform(0.85, 1.15)
        items += [(f"timing_s/agent_loop/harbor_{name}/min", npf(lo * s)),
                  (f"timing_s/agent_loop/harbor_{name}/max", npf(hi * s)),
                  (f"timing_s/agent_loop/harbor_{name}/mean", npf(mean * s))]
    for name, mean in (("num_calls", 19.7), ("num_aborts", 0.21), ("num_preempted", 0.47), ("tool_gap_mean", 2.3),
                       ("total_prompt_tokens", 932040.0), ("total_completion_tokens", 22974.0)):
        s = rng.uniform(0.85, 1.15)
        items += [(f"timing_s/agent_loop/proxy_{name}/mean", npf(mean * s)),
                  (f"timing_s/agent_loop/proxy_{name}/max", npf(mean * s * rng.uniform(2.5, 4)))]
    kl = abs(rng.normal(7e-4, 2e-4))
    items += [("rollout_corr/kl", py(kl)), ("rollout_corr/k3_kl", py(kl * 0.075)),
              ("rollout_corr/chi2_token", py(kl * 12)), ("rollout_corr/chi2_seq", py(kl * 115)),
              ("rollout_corr/log_ppl_diff", py(rng.normal(5e-4, 2e-4))),
              ("rollout_corr/log_ppl_abs_diff", py(abs(rng.normal(1.2e-3, 2e-4)))),
              ("training/rollout_actor_probs_pearson_corr", py(1 - abs(rng.normal(0.003, 0.001)))),
              ("training/rollout_probs_diff_max", py(rng.uniform(0.5, 0.8))),
              ("training/rollout_probs_diff_mean", py(abs(rng.normal(0.0028, 0.0004)))),
              ("fully_async/count/total_generated_samples", str(step * n)),
              ("fully_async/count/stale_samples_processed", str(int(rng.integers(0, 4)))),
              ("fully_async/count/current_param_version", str(step)),
              ("fully_async/count/dropped_stale_samples", str(int(rng.integers(0, 2)))),
              ("fully_async/total_wait_time", py(rng.uniform(40, 180))),
              ("trainer/idle_ratio", py(rng.uniform(0.05, 0.2))),
              ("rollouter/active_time", py(t_step * rng.uniform(0.85, 0.95))), ("rollouter/version_time", py(t_step)),
              ("rollouter/idle_ratio", py(rng.uniform(0.03, 0.1)))]
    gen = t_step * rng.uniform(0.75, 0.82)
    upd = t_step * rng.uniform(0.12, 0.18)
    tokens = int(n * (resp + 2750))
    items += [("timing_s/gen", py(gen)), ("timing_s/reward", py(rng.uniform(2, 4))),
              ("timing_s/old_log_prob", py(rng.uniform(20, 40))), ("timing_s/adv", py(rng.uniform(0.3, 0.9))),
              ("timing_s/update_actor", py(upd)), ("timing_s/step", py(t_step)),
              ("perf/total_num_tokens", str(tokens)), ("perf/time_per_step", py(t_step)),
              ("perf/throughput", py(tokens / t_step / 16))]
    return items


def write_lego_run(out: Path, exp: str, t_end: float, *, log_rel: str, root: Path) -> tuple[Path, Path]:
    """Write the console log (at `out/log_rel`, mtime `t_end`) and the trial tree under
    `out/harbor_trials/`. `root` is where `out` will finally live: the log names trial folders by
    absolute path there. Returns (log path, exp dir)."""
    rng = _rng(0)
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
            trng = _rng(s, p, 2)
            for r in range(N):
                start = step_end[s] - step_s[s] - 600 + trng.uniform(0, step_s[s] * 0.5)
                ok = (s, p, r) not in TRAIN_FAILED
                reward = float(trng.random() < _train_p(logit, s)) if ok else None
                tr = Trial(folder, task, path, reward, start, start + trng.uniform(260, 1500), False)
                _trial_files(f, rel_exp, trials_root, tr, trng)
                by_step.setdefault(s, []).append(tr)
    val_trials: dict[int, list[Trial]] = {}
    for e, after in enumerate(VAL_AFTER):
        vrng = _rng(100 + e)
        begin = val_end[e] - val_s[e]
        for i, (task, path) in enumerate(VAL_TASKS):
            failed = i in VAL_FAILED[e]
            reward = None if failed else float(i in VAL_SOLVED[e])
            start = begin + vrng.uniform(5, 60)
            tr = Trial(val_folder(e), task, path, reward, start, min(start + vrng.uniform(250, 800), val_end[e] - 20), True)
            _trial_files(f, rel_exp, trials_root, tr, vrng)
            val_trials.setdefault(e, []).append(tr)
    f.finish()
    log = out / log_rel
    _write_log(log, exp, t0, step_end, val_end, step_s, val_s, by_step, val_trials, trials_root, t_end)
    _write_vllm_log(log.with_name(f"{exp}_vllm.log"), t0, t_end)
    return log, out / "harbor_trials" / PROJECT / exp


def _config(exp: str) -> dict:
    return {"actor_rollout_ref": {"actor": {"clip_ratio_high": 0.0004, "clip_ratio_low": 0.0003,
                                            "loss_agg_mode": "seq-mean-token-mean",
                                            "optim": {"lr": 1e-06, "weight_decay": 0.01},
                                            "policy_loss": {"loss_mode": "gspo"}, "ppo_mini_batch_size": PROMPTS,
                                            "use_kl_loss": False},
                                  "model": {"enable_gradient_checkpointing": True, "path": "/mnt/shared/models/Qwen3-8B"},
                                  "rollout": {"agent": {"agent_loop_config_path":
                                                        "src/verl_patch/agent_loop/builtin_swe_agent_loop.yaml"},
                                              "mode": "async", "multi_turn": {"enable": True, "max_assistant_turns": 100},
                                              "n": N, "name": "vllm", "response_length": 32768, "temperature": 1.0,
                                              "val_kwargs": {"do_sample": True, "n": 1, "temperature": 0.6}}},
            "algorithm": {"adv_estimator": "grpo", "use_kl_in_reward": False},
            "async_training": {"partial_rollout": True, "staleness_threshold": 0.5, "trigger_parameter_sync_step": 1},
            "data": {"max_prompt_length": 4096, "train_batch_size": PROMPTS, "val_batch_size": len(VAL_TASKS)},
            "trainer": {"experiment_name": exp, "logger": ["console", "wandb"], "n_gpus_per_node": 8, "nnodes": 2,
                        "project_name": PROJECT, "rollout_data_dir": None, "save_freq": 6, "test_freq": 6,
                        "total_training_steps": TOTAL, "val_before_train": True}}


def _write_log(path: Path, exp: str, t0: float, step_end: dict, val_end: dict, step_s: list, val_s: list,
               by_step: dict, val_trials: dict, trials_root: str, t_end: float) -> None:
    tr = prefix("TaskRunner", 1247282)
    alw = prefix("AgentLoopWorker", 1247359, HEAD_IP)
    alw2 = prefix("AgentLoopWorker", 1247362, WORKER_IP)
    w0 = prefix("WorkerDict", 1247323, HEAD_IP)
    w1 = prefix("WorkerDict", 1247324, WORKER_IP)
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t0))
    lines = [f"{stamp},292\tINFO worker.py:1843 -- Connected to Ray cluster. View the dashboard at "
             "\x1b[1m\x1b[32m127.0.0.1:8265 \x1b[39m\x1b[22m\n",
             f"{tr}TaskRunner hostname: lego-node-0, PID: 1247282\n"]
    lines += pprint_lines(tr, _config(exp))
    lines += [f"{tr}Ray cluster at address: {HEAD_IP}:6379\n"]
    for w in (w0, w1):
        lines += [f"{w}Model config after override: Qwen3Config {{\n", f'{w}  "architectures": ["Qwen3ForCausalLM"],\n',
                  f"{w}}}\n"]
    lines += [f"{w0}WARNING {time.strftime('%m-%d %H:%M:%S', time.localtime(t0 + 400))} [cuda.py:95] To see benefits "
              f"of async output processing, enable CUDA graph.{repeated(15)}\n",
              f"{tr}wandb: Tracking run with wandb version 0.21.0\n"]

    def folder_line(w: str, folder: int, count: int) -> str:
        return f"{w}[harbor] launching {count} trials: trials_dir={trials_root}/step_{folder:04d}\n"

    def validation(e: int, after: int) -> None:
        folder = val_folder(e)
        trials = val_trials[e]
        lines.append(f"{tr}test_gen_batch meta info: {{'eos_token_id': 151645, 'pad_token_id': 151643, "
                     f"'recompute_log_prob': False, 'do_sample': True, 'validate': True, 'global_steps': {folder}}}\n")
        lines.append(folder_line(alw, folder, len(trials)))
        lines.extend([f"{alw}[prompt] <|im_start|>system\\nYou are OpenHands agent, a helpful AI assistant that can int...\n",
                  f"{alw}[response] I'll search for the function. step:{after} - not a metric line\n",
                  f"{alw}[score] {int(trials[0].reward or 0)}\n",
                  f"{tr}validation generation end\n"])
        solved = sum(1 for x in trials if x.reward)
        turns = [x.turns for x in trials]
        score = solved / len(trials)
        vals = [("val-core/unknown/reward/mean@1", npf(score)), ("val-aux/num_turns/min", npi(min(turns))),
                ("val-aux/num_turns/max", npi(max(turns))), ("val-aux/num_turns/mean", npf(float(np.mean(turns))))]
        if after == 0:
            lines.extend(validation_pprint(tr, "Initial", [vals[0], vals[3]]))
        lines.append(tr + metric_line(after, vals + [("rollouter/validate_time", py(val_s[e] - 0.79))]) + "\n")
        lines.append(tr + metric_line(after, [("timing_s/merge_val", py(_rng(after, 5).uniform(0.6, 1.9)))]) + "\n")
        if after == TOTAL:
            lines.extend(validation_pprint(tr, "Final", [vals[0], vals[3]]))

    for e, after in enumerate(VAL_AFTER):
        if after == 0:
            validation(e, 0)
    for s in range(1, TOTAL + 1):
        for i, folder in enumerate(train_folders(s)):
            lines.append(folder_line(alw if i % 2 == 0 else alw2, folder, N))
        elapsed = step_end[s] - (t0 + 1150.0)
        lines.append(tqdm_bar("Training Progress", s, TOTAL, elapsed, width=20) + "\n")
        lines.append(tr + metric_line(s, _step_metrics(s, step_s[s], by_step.get(s))) + "\n")
        srng = _rng(s, 6)
        lines.append(tr + metric_line(s, [("timing_s/wait_last_valid", py(srng.uniform(3, 30))),
                                          ("timing_s/param_sync", py(srng.uniform(5, 9)))]) + "\n")
        for e, after in enumerate(VAL_AFTER):
            if after == s:
                validation(e, s)
    lines.append(f"{tr}Training finished: {TOTAL} steps, total time {t_end - t0 - 60:.1f}s\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as fh:
        fh.write("".join(lines))
    os.utime(path, (t_end, t_end))


def _write_vllm_log(path: Path, t0: float, t_end: float) -> None:
    rng = _rng(7)
    pfx = "(vLLMHttpServer pid=1247593) INFO "
    lines = [f"{pfx}{time.strftime('%m-%d %H:%M:%S', time.localtime(t0 + 60))} [api_server.py:1805] vLLM API server version 0.10.2\n",
             f"{pfx}{time.strftime('%m-%d %H:%M:%S', time.localtime(t0 + 100))} [gpu_model_runner.py:2338] Model loading took "
             "15.2683 GiB and 11.032 seconds\n"]
    for tt in np.arange(t0 + 1200, t_end, 450.0):
        lines.append(f"{pfx}{time.strftime('%m-%d %H:%M:%S', time.localtime(float(tt)))} [loggers.py:123] Engine 000: Avg "
                     f"prompt throughput: {rng.uniform(45000, 62000):.1f} tokens/s, Avg generation throughput: "
                     f"{rng.uniform(1800, 4800):.1f} tokens/s, Running: {int(rng.integers(30, 70))} reqs, Waiting: "
                     f"{int(rng.integers(0, 20))} reqs, GPU KV cache usage: {rng.uniform(50, 85):.1f}%, Prefix cache hit "
                     f"rate: {rng.uniform(75, 84):.1f}%\n")
    with open(path, "w", encoding="utf-8", newline="") as fh:
        fh.write("".join(lines))
    os.utime(path, (t_end, t_end))
