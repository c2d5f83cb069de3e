"""The demo runs, each showing the dashboard a different situation, and writing them all: four
prime-rl run dirs (live, completed, resumed after a crash, SFT), a plain verl console log (resumed
after a crash, then stopped), a SWE-Lego-RL log with its Harbor trials (finished) and a Relax
`rollout_result/` dump (finished), all in one output folder:

    <out>/<prime-rl run>/                          configs/ logs/ monitors/ … (x4, `RUN_NAMES`)
    <out>/<VERL_NAME>.log                          verl console log
    <out>/<LEGO_NAME>.log, <LEGO_NAME>_vllm.log    SWE-Lego-RL console log (+ its vLLM sidecar)
    <out>/harbor_trials/swe_lego_rl/<LEGO_NAME>/step_NNNN/<task>-<hex8>/
    <out>/<RELAX_NAME>/rollout_result/{train,eval}/<rollout_id>.jsonl

Why the Lego log sits next to the runs and not in `<out>/logs/`: a folder holding `logs/` is itself
a prime-rl run dir to the prime-rl reader, so `<out>/logs/` would turn the whole demo folder into one
prime-rl run. The log names its trial folders by absolute path instead (swe-lego-rl.md 1.3).
"""
from __future__ import annotations

from pathlib import Path

from rundash_core.demo.specs import RLRunSpec
from rundash_core.sources.prime_rl.demo_run import Attempt, write_rl_run
from rundash_core.sources.prime_rl.demo_sft_run import write_sft_run
from rundash_core.sources.relax.demo_run import STEPS as RELAX_STEPS
from rundash_core.sources.relax.demo_run import write_relax_run
from rundash_core.sources.swe_lego_rl.demo_run import PROJECT as LEGO_PROJECT
from rundash_core.sources.swe_lego_rl.demo_run import write_lego_run
from rundash_core.sources.verl.demo_run import write_verl_run

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

# 5. verl: a GRPO console log (F3 era: np.float64 wrappers), validation every VERL_TEST_FREQ steps and
#    at step 0; launch 1 crashes after VERL_CRASH_AFTER, launch 2 (appended by `tee -a`) resumes from
#    the VERL_RESUME_FROM checkpoint and is stopped after VERL_LAST, short of VERL_TOTAL.
VERL_NAME = "qwen2.5-3b-gsm8k-math-grpo"
VERL_TOTAL, VERL_TEST_FREQ, VERL_SAVE_FREQ = 150, 20, 20
VERL_CRASH_AFTER, VERL_RESUME_FROM, VERL_LAST = 95, 80, 120
# 6. SWE-Lego-RL: fully-async GSPO on SWE-Gym, finished; three validation dumps (see lego_run).
LEGO_NAME = "qwen3-8b-swegym-gspo-async-r2"
# 7. Relax: 10 train rollout files, eval files at 0, 5 and 10; finished.
RELAX_NAME = "relax-qwen3-4b-math-tool"

# Where each of the other runs is (relative to the output folder) and a file that must exist.
OTHER_RUNS = {"verl": f"{VERL_NAME}.log", "swe-lego-rl": f"{LEGO_NAME}.log", "relax": RELAX_NAME}
OTHER_FILES = (f"{VERL_NAME}.log", f"{LEGO_NAME}.log", f"harbor_trials/{LEGO_PROJECT}/{LEGO_NAME}",
               f"{RELAX_NAME}/rollout_result/train/{RELAX_STEPS - 1}.jsonl")
VERL_AGE_S = 5 * 3600.0
LEGO_AGE_S = 30 * 3600.0
RELAX_AGE_S = 9 * 3600.0


def _last_eval(spec: RLRunSpec, step: int) -> int:
    return step // spec.eval_interval * spec.eval_interval


def write_all(out: Path, now: float, root: Path | None = None) -> None:
    """Every run into `out`, as it stands at `now`. Traces are sampled around the RESUMED run's
    crash and stop and at the LIVE run's last steps (plus each run's last eval). `root` is where
    `out` will be moved to (default `out`): the Lego log names its trial folders by path there."""
    write_verl_run(out / OTHER_RUNS["verl"], VERL_NAME, now - VERL_AGE_S, total=VERL_TOTAL, test_freq=VERL_TEST_FREQ,
                   save_freq=VERL_SAVE_FREQ, crash_after=VERL_CRASH_AFTER, resume_from=VERL_RESUME_FROM,
                   last=VERL_LAST)
    write_lego_run(out, LEGO_NAME, now - LEGO_AGE_S, log_rel=OTHER_RUNS["swe-lego-rl"], root=root or out)
    write_relax_run(out, RELAX_NAME, now - RELAX_AGE_S)
    write_rl_run(out, DONE, [Attempt(1, 1, DONE.max_steps, finished=True)], now - 86400.0, set(), with_traces=False)
    write_rl_run(out, RESUMED, [Attempt(1, 1, RESUME_CRASH_STEP, crash=True),
                                Attempt(2, RESUME_FROM + 1, RESUME_LAST, resume_from=RESUME_FROM)],
                 now - 3 * 3600.0, set(range(RESUME_CRASH_STEP - 3, RESUME_CRASH_STEP + 1))
                 | set(range(RESUME_LAST - 3, RESUME_LAST + 1)) | {_last_eval(RESUMED, RESUME_LAST)}, with_traces=True)
    write_sft_run(out, SFT_NAME, SFT_STEPS, now - 2 * 86400.0)
    write_rl_run(out, LIVE, [Attempt(1, 1, LIVE_STEPS)], now,
                 set(range(LIVE_STEPS - 6, LIVE_STEPS + 1)) | {_last_eval(LIVE, LIVE_STEPS)}, with_traces=True)
