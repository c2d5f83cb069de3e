"""The four demo runs, each showing the dashboard a different situation, and writing them all."""
from __future__ import annotations

from pathlib import Path

from .rl_run import Attempt, write_rl_run
from .sft_run import write_sft_run
from .specs import RLRunSpec

# 1. LIVE: still training, its last row is `now`; the live writer keeps it growing.
LIVE = RLRunSpec("math-python+wiki-search--qwen3-4b--7c1e9a42", "Qwen/Qwen3-4B", ("math-python", "wiki-search"),
                 ("gsm8k",), 2000, 1, 10.0, 8, 8, 2e-6, 20, 25, 40, 4, 50, 4.0, 56.0, tau=90.0,
                 toml_path="examples/tool_use/rl.toml")
LIVE_STEPS = 150
# 2. COMPLETED a day ago.
DONE = RLRunSpec("reverse-text--qwen3-0.6b--3f9a1c2e", "Qwen/Qwen3-0.6B", ("reverse-text",), ("reverse-text",),
                 300, 2, 7.5, 16, 8, 3e-6, 10, 50, 32, 2, 100, 0.6, 17.5, 1, 1, tau=70.0,
                 toml_path="examples/reverse_text/rl.toml")
# 3. RESUMED: attempt 1 dies of a CUDA OOM after RESUME_CRASH_STEP, attempt 2 resumes from the
#    RESUME_FROM checkpoint (the steps in between appear twice) and is stopped at RESUME_LAST.
RESUMED = RLRunSpec("acereason-math--qwen3-1.7b--5d0c4b91", "Qwen/Qwen3-1.7B", ("acereason-math",), ("math500",),
                    200, 3, 11.0, 8, 16, 1e-6, 10, 20, 50, 4, 30, 1.7, 41.0, tau=150.0,
                    toml_path="configs/acereason/rl.toml")
RESUME_CRASH_STEP = 80
RESUME_FROM = 60
RESUME_LAST = 140
# 4. SFT, completed two days ago.
SFT_NAME = "r1-reverse-wikipedia-paragraphs-v1-1000--qwen3-0.6b--9e8d7c6b"
SFT_STEPS = 250

RUN_NAMES = {"live": LIVE.name, "completed": DONE.name, "resumed": RESUMED.name, "sft": SFT_NAME}


def _last_eval(spec: RLRunSpec, step: int) -> int:
    return step // spec.eval_interval * spec.eval_interval


def write_all(out: Path, now: float) -> None:
    """The four runs into `out`, as they stand at `now`. Traces are sampled around the RESUMED
    run's crash and stop and at the LIVE run's last steps (plus each run's last eval)."""
    write_rl_run(out, DONE, [Attempt(1, 1, DONE.max_steps, finished=True)], now - 86400.0, set(), with_traces=False)
    write_rl_run(out, RESUMED, [Attempt(1, 1, RESUME_CRASH_STEP, crash=True),
                                Attempt(2, RESUME_FROM + 1, RESUME_LAST, resume_from=RESUME_FROM)],
                 now - 3 * 3600.0, set(range(RESUME_CRASH_STEP - 3, RESUME_CRASH_STEP + 1))
                 | set(range(RESUME_LAST - 3, RESUME_LAST + 1)) | {_last_eval(RESUMED, RESUME_LAST)}, with_traces=True)
    write_sft_run(out, SFT_NAME, SFT_STEPS, now - 2 * 86400.0)
    write_rl_run(out, LIVE, [Attempt(1, 1, LIVE_STEPS)], now,
                 set(range(LIVE_STEPS - 6, LIVE_STEPS + 1)) | {_last_eval(LIVE, LIVE_STEPS)}, with_traces=True)
