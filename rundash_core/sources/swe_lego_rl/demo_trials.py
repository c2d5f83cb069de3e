"""The SWE-Lego-RL demo's story (tasks, schedule, which trials solve) and its Harbor trial dirs:
`result.json`, `config.json`, `trial.log`, `agent/trajectory.json`, `verifier/…` per trial (see
`lego_run` for the whole story). Deterministic for a given clock and seed.
"""
from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field

import numpy as np

from rundash_core.demo.curves import SEED
from rundash_core.demo.run_files import RunFiles

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


def demo_rng(*salt: int) -> np.random.Generator:
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


def proxy_snapshot(traj: dict) -> dict:
    """`proxy_trajectory.json` for an ATIF trajectory: one assistant message per agent step (the
    reasoning before `</think>`, then the text; tool calls with JSON-string arguments) and the
    tool results as tool messages."""
    messages = []
    for st in traj["steps"]:
        if st["source"] != "agent":
            messages.append({"role": st["source"], "content": st["message"]})
            continue
        calls = [{"id": c["tool_call_id"], "type": "function",
                  "function": {"name": c["function_name"], "arguments": json.dumps(c["arguments"])}}
                 for c in st.get("tool_calls", [])]
        messages.append({"role": "assistant", "content": f"{st['reasoning_content']}\n</think>\n\n{st['message']}",
                         "tool_calls": calls})
        for r in (st.get("observation") or {}).get("results", []):
            messages.append({"role": "tool", "tool_call_id": r["source_call_id"], "content": r["content"]})
    return {"session_id": traj["session_id"], "messages_snapshot": messages, "tools": None}


def _issue(task: str, path: str) -> str:
    fn = path.rsplit("/", 1)[-1].removesuffix(".py")
    return (f"<issue>\n{fn}: empty input raises instead of returning the default\n\nPassing an empty value to "
            f"`{fn}` raises an exception instead of falling back to the default (see `{path}`).\n</issue>")


_EXCEPTION = ("Traceback (most recent call last):\n"
              '  File "/opt/harbor/src/harbor/trial/trial.py", line 742, in _setup_environment\n'
              "    await asyncio.wait_for(self._environment.start(), timeout=timeout)\nTimeoutError\n\n"
              "The above exception was the direct cause of the following exception:\n\n"
              "harbor.environments.errors.EnvironmentStartTimeoutError: Environment failed to start within 600.0 seconds\n")


def write_trial(f: RunFiles, rel_exp: str, trials_root: str, tr: Trial, rng: np.random.Generator) -> None:
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
        if tr.val:  # the proxy's LLM-level view: what the Validation page's CoT share reads (spec 3.8, 7)
            f.text(f"{rel}/proxy_trajectory.json", json.dumps(proxy_snapshot(traj), indent=2) + "\n", agent_end)
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


def train_p(task_logit: float, step: int) -> float:
    return float(1 / (1 + np.exp(-(task_logit - 0.4 + 0.12 * step))))
