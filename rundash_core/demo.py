"""Synthetic prime-rl runs, so a first-time user with no directory configured sees a full dashboard.

    import rundash_core.demo as demo
    folder = demo.ensure_demo()          # writes once (< 1 s), returns the output dir holding the runs
    demo.start_live_writer()             # keeps the LIVE run growing, one step every 2 s

The runs follow the current on-disk layout of `../shared/formats/prime-rl.md` exactly (attempt
folders with relative `latest` links, resolved JSON configs, loguru logs with ANSI colours,
`monitors/file/metrics.jsonl` with the real key grammar, a plain live trace chunk with its index
and orch annotations):

1. LIVE: `math-python+wiki-search--qwen3-4b--7c1e9a42`, ~150 of 2000 steps, last row = now.
2. COMPLETED: `reverse-text--qwen3-0.6b--3f9a1c2e`, 300/300 steps, files a day old.
3. RESUMED: `acereason-math--qwen3-1.7b--5d0c4b91`, attempt 1 dies of a CUDA OOM after step 80,
   attempt 2 resumes from the step-60 checkpoint (steps 61..80 appear twice) and stops at 140/200.
4. SFT: `r1-reverse-wikipedia-paragraphs-v1-1000--qwen3-0.6b--9e8d7c6b`, 250/250 steps.

Content is a deterministic function of `now` (seeded numpy RNG, fixed ids). The trace stream
holds a small sample of episodes (a few dozen), not every rollout the metrics count. Everything
is written into a temporary sibling folder and renamed into place, so readers never see a
half-written demo. The live writer only ever appends to files that already exist inside the
demo folder.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
import time
import uuid
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

__all__ = ["DEMO_VERSION", "RUN_NAMES", "demo_root", "ensure_demo", "start_live_writer", "stop_live_writer"]

DEMO_VERSION = 1
MARKER = ".rundash-demo.json"
REFRESH_AFTER_S = 12 * 3600.0  # an older demo (with no live writer in this process) is rewritten
SEED = 20260924
INF_EVERY_S = 5.0
DISPATCH_EVERY_S = 10.0

# --------------------------------------------------------------------------------------------------
# Run and environment definitions
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Env:
    task: str
    reward: str
    binary: bool
    r0: float
    r1: float
    out0: float
    out1: float
    turns0: float
    turns1: float
    in_tok: float
    max_tokens: int
    metrics: tuple[str, ...] = ()
    err_rate: float = 0.0
    system: str = ""


_ENVS = {
    "math-python": _Env("MathPythonTask", "correct_answer", True, 0.36, 0.81, 880, 560, 2.7, 1.8, 380, 2048,
                        ("num_tool_calls", "num_python_errors"), 0.01,
                        "Solve the problem. You can run Python with the `python` tool. Put the final answer in \\boxed{}."),
    "wiki-search": _Env("WikiSearchTask", "correct_answer", True, 0.22, 0.64, 420, 340, 4.3, 3.4, 520, 1024,
                        ("num_tool_calls",), 0.004,
                        "Answer the question using the Wikipedia tools. Reply with a short final answer."),
    "gsm8k": _Env("GSM8KTask", "correct_answer", True, 0.80, 0.92, 260, 210, 1, 1, 120, 2048, (), 0.0,
                  "Solve the math word problem step by step and put the final answer in \\boxed{}."),
    "reverse-text": _Env("ReverseTextTask", "lcs", False, 0.16, 0.87, 95, 72, 1, 1, 96, 512, (), 0.0,
                         "Reverse the text character by character."),
    "acereason-math": _Env("MathTask", "correct_answer", True, 0.29, 0.52, 2500, 3300, 1, 1, 150, 8192, (), 0.002,
                           "Solve the problem. Put the final answer in \\boxed{}."),
    "math500": _Env("MathTask", "correct_answer", True, 0.56, 0.68, 2300, 2900, 1, 1, 140, 8192, (), 0.0,
                    "Solve the problem. Put the final answer in \\boxed{}."),
}

_QUESTIONS = {
    "math-python": [("What is the sum of all primes below 100?", "1060", "print(sum(p for p in range(2, 100) if all(p % d for d in range(2, p))))"),
                    ("How many positive divisors does 360 have?", "24", "print(sum(1 for d in range(1, 361) if 360 % d == 0))"),
                    ("What is 17^5 mod 23?", "21", "print(pow(17, 5, 23))"),
                    ("What is the 20th Fibonacci number?", "6765", "a, b = 0, 1\nfor _ in range(20):\n    a, b = b, a + b\nprint(a)"),
                    ("How many integers from 1 to 1000 are divisible by 3 or 7?", "428", "print(sum(1 for i in range(1, 1001) if i % 3 == 0 or i % 7 == 0))"),
                    ("What is the least common multiple of 12, 18 and 30?", "180", "import math\nprint(math.lcm(12, 18, 30))")],
    "wiki-search": [("Who composed the opera The Magic Flute?", "Wolfgang Amadeus Mozart", "the_magic_flute"),
                    ("In which year did the Berlin Wall fall?", "1989", "berlin_wall"),
                    ("What is the capital of Australia?", "Canberra", "australia"),
                    ("Who painted the ceiling of the Sistine Chapel?", "Michelangelo", "sistine_chapel"),
                    ("What is the tallest mountain in Africa?", "Mount Kilimanjaro", "mount_kilimanjaro")],
    "gsm8k": [("Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
               "How many clips did Natalia sell altogether in April and May?", "72", ""),
              ("Weng earns $12 an hour for babysitting. Yesterday, she just did 50 minutes of babysitting. "
               "How much did she earn?", "10", ""),
              ("James writes a 3-page letter to 2 different friends twice a week. How many pages does he write a year?", "624", ""),
              ("A robe takes 2 bolts of blue fiber and half that much white fiber. How many bolts in total does it take?", "3", "")],
    "reverse-text": [("The quick brown fox jumps over the lazy dog", "", ""),
                     ("Reinforcement learning rewards good behaviour", "", ""),
                     ("Paris is the capital of France", "", ""),
                     ("A journey of a thousand miles begins with a single step", "", ""),
                     ("Light travels faster than sound", "", "")],
    "acereason-math": [("How many ordered pairs (a, b) of positive integers satisfy a + b = 30 and gcd(a, b) = 1?", "8", ""),
                       ("What is the remainder when 2^100 is divided by 7?", "2", ""),
                       ("How many trailing zeros does 100! have?", "24", ""),
                       ("What is the sum of the interior angles of a convex 12-gon, in degrees?", "1800", "")],
    "math500": [("If x + 1/x = 3, what is x^2 + 1/x^2?", "7", ""),
                ("What is the smallest positive integer n with 17n = 1 (mod 83)?", "44", ""),
                ("Simplify sqrt(242).", "11\\sqrt{2}", "")],
}

_PY_TOOL = {"type": "function", "name": "python", "description": "Run Python code and return its stdout.",
            "parameters": {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}}
_WIKI_TOOLS = [
    {"type": "function", "name": "search_pages", "description": "Search Wikipedia titles; returns the top page ids.",
     "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}},
    {"type": "function", "name": "read_section", "description": "Read one section of a page.",
     "parameters": {"type": "object", "properties": {"section_id": {"type": "string"}}, "required": ["section_id"]}},
]


@dataclass(frozen=True)
class _RL:
    name: str
    model: str
    train_envs: tuple[str, ...]
    eval_envs: tuple[str, ...]
    max_steps: int
    salt: int
    step_s: float  # mean orchestrator seconds per step
    groups: int  # tasks per env per step
    k: int  # rollouts per example
    lr: float
    warmup: int
    eval_interval: int
    eval_examples: int
    eval_k: int
    ckpt_interval: int
    params_b: float
    mem_gib: float
    gpus_train: int = 2
    gpus_infer: int = 2
    tau: float = 120.0  # reward time constant (steps)
    toml_path: str = "rl.toml"

    @property
    def batch_size(self) -> int:
        return self.groups * self.k * len(self.train_envs)

    @property
    def run_id(self) -> str:
        return uuid.UUID(int=zlib.crc32(self.name.encode()) * 2654435761 % (1 << 128)).hex


LIVE = _RL("math-python+wiki-search--qwen3-4b--7c1e9a42", "Qwen/Qwen3-4B", ("math-python", "wiki-search"), ("gsm8k",),
           2000, 1, 10.0, 8, 8, 2e-6, 20, 25, 40, 4, 50, 4.0, 56.0, tau=90.0, toml_path="examples/tool_use/rl.toml")
DONE = _RL("reverse-text--qwen3-0.6b--3f9a1c2e", "Qwen/Qwen3-0.6B", ("reverse-text",), ("reverse-text",),
           300, 2, 7.5, 16, 8, 3e-6, 10, 50, 32, 2, 100, 0.6, 17.5, 1, 1, tau=70.0,
           toml_path="examples/reverse_text/rl.toml")
RESUMED = _RL("acereason-math--qwen3-1.7b--5d0c4b91", "Qwen/Qwen3-1.7B", ("acereason-math",), ("math500",),
              200, 3, 11.0, 8, 16, 1e-6, 10, 20, 50, 4, 30, 1.7, 41.0, tau=150.0,
              toml_path="configs/acereason/rl.toml")
SFT_NAME = "r1-reverse-wikipedia-paragraphs-v1-1000--qwen3-0.6b--9e8d7c6b"
SFT_STEPS = 250
RESUME_CRASH_STEP = 80
RESUME_FROM = 60
RESUME_LAST = 140
LIVE_STEPS = 150

RUN_NAMES = {"live": LIVE.name, "completed": DONE.name, "resumed": RESUMED.name, "sft": SFT_NAME}


# --------------------------------------------------------------------------------------------------
# Small formatting helpers
# --------------------------------------------------------------------------------------------------

def _row(step: int | None, t: float, values: dict, producer: str) -> str:
    """One metrics line: `step` first, `time`, the metrics (finite floats only), `producer` last.
    Time-keyed gauges are noisy anyway and keep 4 significant digits, step metrics 6."""
    row = {"step": step, "time": round(float(t), 4)}
    fmt = ".4g" if step is None else ".6g"
    for k, v in values.items():
        v = float(v)
        if v == v and abs(v) != float("inf"):
            row[k] = float(format(v, fmt))
    row["producer"] = producer
    return json.dumps(row) + "\n"


_LEVEL_CODE = {"INFO": "\x1b[1m", "WARNING": "\x1b[33m\x1b[1m", "SUCCESS": "\x1b[32m\x1b[1m",
               "DEBUG": "\x1b[34m\x1b[1m", "ERROR": "\x1b[31m\x1b[1m", "TRACE": "\x1b[36m\x1b[1m"}


def _loguru(t: float, level: str, msg: str) -> str:
    """A loguru line exactly as prime-rl writes it with colorize=True (spec 3.2)."""
    c = _LEVEL_CODE[level]
    hms = time.strftime("%H:%M:%S", time.localtime(t))
    return f"\x1b[2m{hms}\x1b[0m {c}{level:>7}\x1b[0m {c}\x1b[22m{msg}\x1b[0m\x1b[0m\n"


def _vllm(t: float, msg: str, pid: int = 3134, where: str = "loggers.py:123") -> str:
    return f"(APIServer pid={pid}) INFO {time.strftime('%m-%d %H:%M:%S', time.localtime(t))} [{where}] {msg}\n"


def _access(route: str, pid: int = 3134) -> str:
    return f'(APIServer pid={pid}) INFO:     127.0.0.1:53574 - "POST {route} HTTP/1.1" 200 OK\n'


def _plain(t: float, msg: str) -> str:
    return f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(t))} INFO {msg}\n"


def _uuid(rng: np.random.Generator, dashed: bool = False) -> str:
    u = uuid.UUID(bytes=rng.bytes(16), version=4)
    return str(u) if dashed else u.hex


def _sorted_stats(arr: np.ndarray) -> dict[str, float]:
    s = np.sort(np.asarray(arr, dtype=float))
    n = s.size
    if n == 0:
        return {}

    def q(p):
        pos = p * (n - 1)
        lo = int(pos)
        hi = min(lo + 1, n - 1)
        return s[lo] + (s[hi] - s[lo]) * (pos - lo)

    return {"mean": s.mean(), "max": s[-1], "min": s[0], "p10": q(0.1), "p90": q(0.9)}


def _put(out: dict, prefix: str, arr, which=("mean", "max", "min", "p10", "p90")) -> None:
    st = _sorted_stats(arr)
    for w in which:
        if w in st:
            out[f"{prefix}/{w}"] = st[w]


# --------------------------------------------------------------------------------------------------
# RL simulation: values as a function of (run, step, attempt)
# --------------------------------------------------------------------------------------------------

class _Sim:
    def __init__(self, spec: _RL):
        self.s = spec

    def rng(self, *salt: int) -> np.random.Generator:
        return np.random.default_rng([SEED, self.s.salt, *[int(x) % (1 << 31) for x in salt]])

    def _progress(self, step: float) -> float:
        return 1.0 - np.exp(-max(step, 0) / self.s.tau)

    def reward_p(self, env: str, step: float) -> float:
        e = _ENVS[env]
        return e.r0 + (e.r1 - e.r0) * self._progress(step)

    def out_mean(self, env: str, step: float) -> float:
        e = _ENVS[env]
        return e.out0 + (e.out1 - e.out0) * self._progress(step)

    def turns_mean(self, env: str, step: float) -> float:
        e = _ENVS[env]
        return e.turns0 + (e.turns1 - e.turns0) * self._progress(step)

    def lr(self, step: int) -> float:
        s = self.s
        if step <= s.warmup:
            return s.lr * step / max(s.warmup, 1)
        frac = (step - s.warmup) / max(s.max_steps - s.warmup, 1)
        return s.lr * (0.1 + 0.9 * 0.5 * (1 + np.cos(np.pi * min(frac, 1.0))))

    def orch_duration(self, step: int, attempt: int) -> float:
        rng = self.rng(step, attempt, 7)
        growth = np.mean([self.out_mean(e, step) / self.out_mean(e, 0) for e in self.s.train_envs]) ** 0.5
        return float(self.s.step_s * growth * rng.lognormal(0, 0.12))

    # One batch of episodes ----------------------------------------------------------------------
    def _sample(self, rng: np.random.Generator, env: str, step: int, groups: int, k: int) -> dict:
        e = _ENVS[env]
        p = self.reward_p(env, step)
        n = groups * k
        if e.binary:
            pg = np.clip(p + rng.normal(0, 0.15, groups), 0.02, 0.98)
            rew = (rng.random((groups, k)) < pg[:, None]).astype(float)
        else:
            c = 7.0
            rew = rng.beta(max(p * c, 0.05), max((1 - p) * c, 0.05), (groups, k))
        out = rng.lognormal(np.log(self.out_mean(env, step)) - 0.08, 0.42, n)
        trunc = out >= e.max_tokens
        out = np.minimum(out, e.max_tokens).round()
        if e.turns0 > 1:
            turns = 1 + rng.poisson(max(self.turns_mean(env, step) - 1, 0.0), n)
            turns = np.minimum(turns, 8)
        else:
            turns = np.ones(n)
        inp = (e.in_tok * (1 + 0.9 * (turns - 1)) * rng.lognormal(0, 0.12, n)).round()
        err = rng.random(n) < e.err_rate
        flat = rew.ravel()
        if e.binary:
            flat[trunc] = 0.0
        flat[err] = 0.0
        rew = flat.reshape(groups, k)
        if e.binary:
            solved = rew.sum(axis=1)
            trainable_g = (solved > 0) & (solved < k)
        else:
            trainable_g = rew.std(axis=1) > 1e-6
            solved = (rew >= 0.999).sum(axis=1)
        trainable = np.repeat(trainable_g, k) & ~err
        agent_t = out / rng.uniform(55, 75, n) + (turns - 1) * rng.uniform(0.4, 1.5, n)
        setup_t = rng.lognormal(np.log(0.8 if e.turns0 > 1 else 0.05), 0.4, n)
        scoring_t = rng.lognormal(np.log(0.03), 0.5, n)
        extra = {}
        if "num_tool_calls" in e.metrics:
            extra["num_tool_calls"] = np.maximum(turns - 1, 0)
        if "num_python_errors" in e.metrics:
            extra["num_python_errors"] = rng.binomial(np.maximum(turns - 1, 0).astype(int), 0.12)
        return dict(reward=flat, out=out, inp=inp, total=out + inp, turns=turns, trunc=trunc, err=err,
                    trainable=trainable, solved=solved, k=k, groups=groups, agent_t=agent_t, setup_t=setup_t,
                    scoring_t=scoring_t, total_t=agent_t + setup_t + scoring_t + 0.2, extra=extra, env=env)

    @staticmethod
    def _pool(samples: list[dict]) -> dict:
        out = {}
        for key in ("reward", "out", "inp", "total", "turns", "trunc", "err", "trainable", "solved",
                    "agent_t", "setup_t", "scoring_t", "total_t"):
            out[key] = np.concatenate([s[key] for s in samples])
        out["k"] = samples[0]["k"]
        out["extra"] = {}
        out["env"] = None
        return out

    def _scope_keys(self, row: dict, scope: str, sm: dict, *, eval_mode: bool = False, full: bool = True) -> None:
        """Episode statistics of one scope (spec 4.5), a reduced but representative stat set;
        `full=False` (per-env scopes next to `train/agg`) leaves out timings and solve rates."""
        e = _ENVS[sm["env"]] if sm["env"] else None
        rname = e.reward if e else _ENVS[self.s.train_envs[0]].reward
        a = f"{scope}/all"
        err = sm["err"].mean()
        row[f"{a}/has_error/mean"] = err
        row[f"{a}/cancelled/mean"] = 0.0
        _put(row, f"{a}/num_total_tokens", sm["total"])
        _put(row, f"{a}/num_input_tokens", sm["inp"], ("mean",))
        _put(row, f"{a}/num_output_tokens", sm["out"], ("mean", "max"))
        _put(row, f"{a}/num_turns", sm["turns"], ("mean", "max"))
        row[f"{a}/num_branches/mean"] = 1.0
        _put(row, f"{a}/agent/reward", sm["reward"])
        row[f"{a}/agent/is_truncated/mean"] = sm["trunc"].mean()
        row[f"{a}/agent/is_completed/mean"] = 1.0 - err
        row[f"{a}/agent/rewards/{rname}/mean"] = sm["reward"].mean()
        for m, vals in sm["extra"].items():
            row[f"{a}/agent/metrics/{m}/mean"] = np.mean(vals)
        row[f"{a}/agent/has_error/mean"] = err
        k = sm["k"]
        if full:
            for name, key in (("setup", "setup_t"), ("agent", "agent_t"), ("scoring", "scoring_t"), ("total", "total_t")):
                row[f"{a}/agent/timing/{name}/mean"] = sm[key].mean()
            row[f"{a}/agent/stop_condition/agent_completed"] = 1.0 - err
            row[f"{a}/agent/stop_condition/generation_truncated"] = sm["trunc"].mean()
        if full and (e is None or e.binary):
            solved = sm["solved"]
            row[f"{a}/agent/solved_none"] = np.mean(solved == 0)
            row[f"{a}/agent/solved_all"] = np.mean(solved == k)
            row[f"{a}/agent/solved_some"] = np.mean((solved > 0) & (solved < k))
        if not eval_mode:
            row[f"{a}/agent/is_trainable/mean"] = sm["trainable"].mean()
            row[f"{a}/agent/is_admitted/mean"] = 1.0
        eff = sm["trainable"] if not eval_mode else ~sm["err"]
        if not eff.any():
            eff = ~sm["err"]
        f = f"{scope}/effective"
        _put(row, f"{f}/num_total_tokens", sm["total"][eff], ("mean", "max"))
        row[f"{f}/num_turns/mean"] = sm["turns"][eff].mean()
        row[f"{f}/num_branches/mean"] = 1.0
        _put(row, f"{f}/agent/reward", sm["reward"][eff], ("mean", "p10", "p90"))
        row[f"{f}/agent/is_truncated/mean"] = sm["trunc"][eff].mean()
        row[f"{f}/agent/rewards/{rname}/mean"] = sm["reward"][eff].mean()

    def orch_row(self, step: int, attempt: int, cum: dict) -> tuple[dict, dict]:
        """The orchestrator's big per-step row and a summary for the log line."""
        s = self.s
        rng = self.rng(step, attempt, 1)
        samples = [self._sample(rng, env, step, s.groups, s.k) for env in s.train_envs]
        row: dict[str, float] = {}
        pooled = self._pool(samples) if len(samples) > 1 else samples[0]
        if len(samples) > 1:  # single-env runs are shown as their env's section (spec 8.3)
            self._scope_keys(row, "train/agg", pooled)
        for sm in samples:
            self._scope_keys(row, f"train/{sm['env']}", sm, full=len(samples) == 1)
        tokens = float(pooled["total"].sum())
        inp = float(pooled["inp"].sum())
        out = float(pooled["out"].sum())
        n = float(pooled["reward"].size)
        cum["tokens"] = cum.get("tokens", 0.0) + tokens
        cum["rollouts"] = cum.get("rollouts", 0.0) + n
        cum["tasks"] = cum.get("tasks", 0.0) + n / s.k
        duration = self.orch_duration(step, attempt)
        row.update({
            "progress/tokens": tokens, "progress/input_tokens": inp, "progress/output_tokens": out,
            "progress/rollouts": n, "progress/tasks": n / s.k, "progress/total_tokens": cum["tokens"],
            "progress/total_rollouts": cum["rollouts"], "progress/total_tasks": cum["tasks"],
            "time/step": duration, "time/pack": rng.lognormal(np.log(0.15), 0.3),
            "time/save_ckpt": rng.uniform(1.5, 3.0) if step % s.ckpt_interval == 0 else 0.0,
            "time/wait_for_policy": rng.exponential(0.8) if rng.random() < 0.4 else 0.0,
            "off_policy/mean": rng.uniform(0.45, 0.8), "off_policy/max": 1.0,
            "off_policy/in_flight/mean": rng.uniform(0.3, 0.7), "off_policy/in_flight/max": 1.0,
            "off_policy/dropped": float(rng.random() < 0.05),
        })
        for env in s.train_envs:
            row[f"batch/{env}"] = 1.0 / len(s.train_envs)
        summary = {"reward": float(pooled["reward"].mean()), "tokens": tokens, "n": n, "time": duration,
                   "seq": tokens / n, "entropy_env": {sm["env"]: float(sm["out"].mean()) for sm in samples}}
        return row, summary

    def trainer_rows(self, step: int, attempt: int, summary: dict, wait: float | None = None) -> tuple[list[dict], dict]:
        """The RL trainer's 5 rows for one step (perf, optim, tensor stats, time, system).
        `wait` is how long the trainer waited for the batch (random when not given)."""
        s = self.s
        rng = self.rng(step, attempt, 2)
        prog = self._progress(step)
        fb = summary["time"] * rng.uniform(0.5, 0.6)
        load, bcast = rng.uniform(0.1, 0.4), rng.uniform(0.8, 2.0)
        wait = rng.exponential(0.8) if wait is None else float(wait)
        ckpt = rng.uniform(8, 14) if step % s.ckpt_interval == 0 else 0.0
        t_step = fb + load + bcast + wait
        thr = summary["tokens"] / t_step
        perf = {"perf/throughput": thr, "perf/throughput_per_gpu": thr / s.gpus_train,
                "perf/mfu": 6 * s.params_b * 1e9 * thr / (s.gpus_train * 989e12) * 100,
                "perf/peak_memory": s.mem_gib * rng.uniform(0.93, 1.05)}
        gn = (0.16 + 0.12 * np.exp(-step / 40)) * rng.lognormal(0, 0.18)
        if rng.random() < 0.035:
            gn *= rng.uniform(3, 8)
        optim = {"optim/lr": self.lr(step), "optim/grad_norm": gn}
        ent_base = 0.62 - 0.38 * prog
        tensors = {}
        lm = rng.normal(-0.004, 0.008)
        tensors.update({"loss/mean": lm, "loss/median": lm * 0.9, "loss/std": abs(rng.normal(0.03, 0.006)),
                        "loss/min": lm - rng.uniform(0.08, 0.25), "loss/max": lm + rng.uniform(0.06, 0.2)})
        envs = {"all": 1.0, **{e: rng.uniform(0.8, 1.2) for e in s.train_envs}} if len(s.train_envs) > 1 else {"all": 1.0}
        kl_all = None
        for name, scale in envs.items():
            em = ent_base * scale * rng.lognormal(0, 0.05)
            tensors[f"entropy/{name}/mean"] = em
            tensors[f"entropy/{name}/std"] = em * rng.uniform(2.4, 3.0)
            tensors[f"entropy/{name}/max"] = rng.uniform(7.0, 9.5)
        for name, scale in envs.items():
            km = 6e-4 * scale * rng.lognormal(0, 0.35) * (1 + 3 * (gn > 0.6))
            kl_all = km if name == "all" else kl_all
            tensors[f"mismatch_kl/{name}/mean"] = km
            tensors[f"mismatch_kl/{name}/max"] = km * rng.uniform(30, 90)
        tensors["is_masked/all/mean"] = rng.uniform(0, 0.004)
        tensors["is_masked/all/max"] = 1.0 if rng.random() < 0.3 else 0.0
        tensors["kl_ent_ratio/mean"] = kl_all / tensors["entropy/all/mean"]
        times = {"time/step": t_step + ckpt, "time/wait_for_batch": wait, "time/load_data": load,
                 "time/broadcast_weights": bcast, "time/save_ckpt": ckpt, "time/forward_backward": fb}
        used = 180.0 + 8.0 * s.params_b * min(step // s.ckpt_interval, 2)
        system = {"system/ckpt_disk_free_gib": 2012.1 - 1200.1 - used, "system/ckpt_disk_used_gib": 1200.1 + used,
                  "system/ckpt_disk_total_gib": 2012.1, "system/ckpt_disk_free_ratio": (812.0 - used) / 2012.1}
        log = {"time": t_step + ckpt, "busy": t_step + ckpt - wait, "loss": lm, "entropy": tensors["entropy/all/mean"], "kl": kl_all, "gn": gn,
               "lr": optim["optim/lr"], "thr": thr, "mfu": perf["perf/mfu"], "mem": perf["perf/peak_memory"],
               "ckpt": ckpt}
        return [perf, optim, tensors, times, system], log

    def eval_row(self, env: str, step: int, attempt: int) -> tuple[dict, dict]:
        s = self.s
        rng = self.rng(step, attempt, 3, zlib.crc32(env.encode()))
        sm = self._sample(rng, env, step, s.eval_examples, s.eval_k)
        row: dict[str, float] = {}
        self._scope_keys(row, f"eval/{env}", sm, eval_mode=True)
        k = s.eval_k
        correct = sm["reward"].reshape(-1, k)
        binary = _ENVS[env].binary
        c = (correct >= 0.5) if binary else (correct >= 0.999)
        row[f"eval/{env}/all/agent/avg@{k}"] = sm["reward"].mean()
        row[f"eval/{env}/effective/agent/pass@1"] = c.mean()
        row[f"eval/{env}/effective/agent/pass@{k}"] = c.any(axis=1).mean()
        row[f"eval/{env}/effective/agent/pass^{k}"] = c.all(axis=1).mean()
        row[f"eval/{env}/policy_version"] = float(step)
        return row, {"avg": row[f"eval/{env}/all/agent/avg@{k}"], "pass": row[f"eval/{env}/effective/agent/pass@{k}"]}

    # Time-keyed rows ----------------------------------------------------------------------------
    def inference_rows(self, times: np.ndarray, salt: int) -> list[tuple[float, dict]]:
        s = self.s
        n = len(times)
        if n == 0:
            return []
        rng = self.rng(salt, 4)
        base_run = 10 + 4 * np.sin(times / 97.0) + rng.normal(0, 1.5, n)
        kv = np.clip(0.25 + 0.2 * np.sin(times / 53.0) + rng.normal(0, 0.08, n), 0.02, 0.97)
        gen = np.maximum(0, 520 * s.gpus_infer * (1 + 0.3 * np.sin(times / 71.0)) + rng.normal(0, 90, n)) / s.params_b ** 0.3
        prompt = np.maximum(0, gen * rng.uniform(5, 11, n))
        hit = np.clip(0.72 + rng.normal(0, 0.06, n), 0.3, 0.97)
        waiting = np.where(rng.random(n) < 0.1, rng.integers(1, 6, n), 0)
        preempt = np.where(rng.random(n) < 0.03, rng.uniform(0.1, 1.0, n), 0.0)
        rows = []
        for i in range(n):
            spread = rng.uniform(0.1, 0.3)
            r = {
                "inference/agg/kv_cache_usage_perc/mean": kv[i], "inference/agg/kv_cache_usage_perc/min": kv[i] * (1 - spread),
                "inference/agg/kv_cache_usage_perc/max": min(kv[i] * (1 + spread), 1.0),
                "inference/agg/num_preemptions_total:rate/sum": preempt[i],
                "inference/agg/num_preemptions_total:rate/max": preempt[i],
                "inference/agg/num_requests_running/mean": max(base_run[i], 0.0),
                "inference/agg/num_requests_running/min": max(base_run[i] - 3, 0.0),
                "inference/agg/num_requests_running/max": max(base_run[i] + 3, 0.0),
                "inference/agg/num_requests_waiting/mean": waiting[i] / 2, "inference/agg/num_requests_waiting/min": 0.0,
                "inference/agg/num_requests_waiting/max": float(waiting[i]),
                "inference/agg/prefix_cache_hit_rate/pooled": hit[i],
                "inference/agg/prefix_cache_hit_rate/min": hit[i] * (1 - spread),
                "inference/agg/generation_tokens_total:rate/sum": gen[i],
                "inference/agg/generation_tokens_total:rate/min": gen[i] / s.gpus_infer * (1 - spread),
                "inference/agg/prompt_tokens_total:rate/sum": prompt[i],
                "inference/agg/prompt_tokens_total:rate/max": prompt[i] / s.gpus_infer * (1 + spread),
            }
            for g in range(s.gpus_infer):
                r[f"inference/server0.{g}/num_requests_running"] = float(max(round(base_run[i] / s.gpus_infer + rng.normal(0, 1)), 0))
            rows.append((float(times[i]), r))
        return rows

    def dispatcher_rows(self, times: np.ndarray, salt: int, policy_at, eval_at) -> list[tuple[float, dict]]:
        s = self.s
        n = len(times)
        if n == 0:
            return []
        rng = self.rng(salt, 5)
        cap = float(s.batch_size * 2)
        rows = []
        for i in range(n):
            t = float(times[i])
            ev = bool(eval_at(t))
            rows.append((t, {
                "dispatcher/inflight/train": float(rng.integers(int(cap * 0.6), int(cap) + 1)) if not ev else float(rng.integers(0, 8)),
                "dispatcher/inflight/eval": float(rng.integers(8, s.eval_examples * s.eval_k + 1)) if ev else 0.0,
                "dispatcher/queued/eval": float(rng.integers(0, 20)) if ev else 0.0, "dispatcher/mode": 1.0 if ev else 0.0,
                "dispatcher/errored/train": float(rng.random() < 0.05), "dispatcher/off_policy/max": 1.0,
                "dispatcher/off_policy/mean": rng.uniform(0.45, 0.8), "dispatcher/cancelled/train": 0.0,
                "concurrency/max_inflight": cap, "watcher/policy_version": float(policy_at(t)),
                "event_loop_lag/p99": rng.lognormal(np.log(0.008), 0.5),
            }))
        return rows


# --------------------------------------------------------------------------------------------------
# Episodes (spec 5.5) and their index rows (5.4)
# --------------------------------------------------------------------------------------------------

_ROLE_TOK = {"system": 8948, "user": 872, "assistant": 77091, "tool": 872}


def _tok(text: str, limit: int = 48) -> list[int]:
    return [300 + zlib.crc32(w.encode()) % 151000 for w in text.split()][:limit]


class _Trace:
    def __init__(self, rng: np.random.Generator, model: str, t0: float):
        self.rng, self.model, self.t = rng, model, t0
        self.nodes: list[dict] = []
        self.calls: list[dict] = []
        self.context = 0  # tokens along the path so far
        self.fed = 0  # tokens already sent to the model by earlier calls

    def add(self, role: str, content: str | None, *, reasoning: str | None = None, tool_calls=None,
            extra: dict | None = None, tools=None, finish: str = "stop", max_tokens: int = 2048) -> None:
        sampled = role == "assistant"
        head = ([198] if self.nodes else []) + [151644, _ROLE_TOK[role], 198]
        if role == "tool":
            content_tok = _tok("<tool_response> " + (content or "") + " </tool_response>")
        else:
            content_tok = _tok(content or "")
        if tool_calls:
            content_tok += _tok(" ".join(f"<tool_call> {tc['name']} {tc['arguments']} </tool_call>" for tc in tool_calls))
        body = ([151667, 198] + _tok(reasoning or "", 64) + [198, 151668, 271] if sampled else []) + content_tok + [151645]
        ids = head + body
        mask = [False] * len(head) + [sampled] * len(body)
        is_content = [False] * len(head) + [False] * (len(body) - len(content_tok) - 1) + [True] * len(content_tok) + [False]
        if sampled:
            start = self.t + self.rng.uniform(0.05, 0.3)
            self.t = start + len(body) / self.rng.uniform(40, 80)
            usage = {"prompt_tokens": self.context + len(head) - self.fed, "completion_tokens": len(body)}
            if self.fed:
                usage["cached_input_tokens"] = self.fed
            self.calls.append({"node": len(self.nodes), "model": self.model,
                               "sampling": {"temperature": 1.0, "top_p": 1.0, "max_tokens": max_tokens},
                               "endpoint": "/chat/completions", "finish_reason": finish, "usage": usage,
                               "time": {"start": round(start, 4), "end": round(self.t, 4)}})
            self.fed = self.context + len(ids)
        else:
            self.t += self.rng.uniform(0.2, 1.5) if role == "tool" else 0.0
        message = {"role": role}
        if reasoning:
            message["reasoning_content"] = reasoning
        if content is not None:
            message["content"] = content
        if tool_calls:
            message["tool_calls"] = tool_calls
        if extra:
            message.update(extra)
        node = {}
        if self.nodes:
            node["parent"] = len(self.nodes) - 1
        if tools is not None:
            node["tools"] = tools
        node.update({"semantic_parents": [], "message": message, "sampled": sampled, "timestamp": round(self.t, 4),
                     "token_ids": ids, "mask": mask, "is_content": is_content,
                     "logprobs": [round(-float(x), 4) for x in self.rng.exponential(0.12, sum(mask))]})
        self.nodes.append(node)
        self.context += len(ids)


def _tool_call(rng, name: str, args: dict) -> dict:
    return {"id": f"chatcmpl-tool-{_uuid(rng)}", "type": "function", "name": name, "arguments": json.dumps(args)}


def _episode(spec: _RL, rng: np.random.Generator, env: str, step: int, kind: str, t_dispatch: float,
             group_id: str, reward: float, qi: int, *, error: tuple[str, str] | None = None,
             truncated: bool = False) -> tuple[dict, dict]:
    """One Episode record (`vf.Episode.to_record()` shape) and its index row (without line/chunk/offset)."""
    e = _ENVS[env]
    q, answer, aux = _QUESTIONS[env][qi % len(_QUESTIONS[env])]
    data = {"idx": qi, "id": f"{env}-{qi:04d}", "prompt": q, "system_prompt": e.system}
    if answer:
        data["answer"] = answer
    key = format(zlib.crc32(f"{env}/{qi}".encode()), "08x") * 8
    task = {"type": e.task, "data": data, "key": key, "hash": key}
    policy = max(step - 1, 0) if kind == "train" else step
    ep = {"id": _uuid(rng), "env": {"id": env, "name": env}, "task": task, "group": {"id": group_id},
          "run": {"type": "train", "id": spec.run_id, "name": spec.name,
                  "work": {"type": kind, "step": step, "policy": {"start": policy, "end": policy}}}}
    base = {"id": ep["id"], "kind": kind, "env": env, "group": group_id, "advantage": None, "cost": None}
    if error:  # env-level failure before any trace existed
        arrival = t_dispatch + rng.uniform(5, 30)
        ep.update({"ok": False, "is_timeout": False, "errors": [{"type": error[0], "message": error[1]}],
                   "traces": [], "num_input_tokens": 0, "num_output_tokens": 0, "num_total_tokens": 0})
        return ep, {**base, "trace_ids": [], "ok": False, "num_errors": 1, "reward": None, "input_tokens": 0,
                    "output_tokens": 0, "turns": 0, "branches": 0, "stop_condition": None, "truncated": False,
                    "dispatch": round(t_dispatch, 4), "arrival": round(arrival, 4),
                    "duration": round(arrival - t_dispatch, 4)}
    boot_end = t_dispatch + rng.uniform(0.03, 0.2)
    setup_end = boot_end + (rng.uniform(0.5, 1.5) if e.turns0 > 1 else rng.uniform(0.01, 0.05))
    tr = _Trace(rng, spec.model, setup_end)
    good = reward >= 0.5
    tools = [_PY_TOOL] if env == "math-python" else list(_WIKI_TOOLS) if env == "wiki-search" else []
    tr.add("system", e.system, tools=tools or None)
    tr.add("user", q)
    metrics: dict[str, float] = {}
    finish = "length" if truncated else "stop"
    if env == "math-python":
        errors = 0
        if rng.random() < 0.25:
            call = _tool_call(rng, "python", {"code": "import sympy\n" + aux})
            tr.add("assistant", None, reasoning=f"Let me compute this with Python. {q}", tool_calls=[call], finish="tool_calls")
            tr.add("tool", "Traceback (most recent call last):\nModuleNotFoundError: No module named 'sympy'",
                   extra={"tool_call_id": call["id"], "name": "python"})
            errors = 1
        call = _tool_call(rng, "python", {"code": aux})
        tr.add("assistant", None, reasoning="I'll compute it with the python tool to be safe." if not errors
               else "sympy is not installed; plain Python is enough.", tool_calls=[call], finish="tool_calls")
        tr.add("tool", answer, extra={"tool_call_id": call["id"], "name": "python"})
        final = answer if good else str(int(answer) + int(rng.integers(1, 9)))
        tr.add("assistant", f"The answer is $\\boxed{{{final}}}$.", reasoning=f"The tool printed {answer}.",
               finish=finish)
        metrics = {"num_tool_calls": float(1 + errors), "num_python_errors": float(errors)}
    elif env == "wiki-search":
        call = _tool_call(rng, "search_pages", {"query": q.rstrip("?")[-40:]})
        tr.add("assistant", None, reasoning=f"I need to find: {q} I'll search for the page first.", tool_calls=[call],
               finish="tool_calls")
        tr.add("tool", json.dumps([{"page_id": aux, "title": aux.replace("_", " ").title()}]),
               extra={"tool_call_id": call["id"], "name": "search_pages"})
        call = _tool_call(rng, "read_section", {"section_id": f"{aux}:background"})
        tr.add("assistant", None, reasoning="The 'Background' section should contain the answer.", tool_calls=[call],
               finish="tool_calls")
        tr.add("tool", f"... {answer} ..." if good else "... (no relevant passage) ...",
               extra={"tool_call_id": call["id"], "name": "read_section"})
        tr.add("assistant", answer if good else "I could not find the answer.", reasoning="Found it." if good else
               "The section does not say.", finish=finish)
        metrics = {"num_tool_calls": 2.0}
    elif env == "reverse-text":
        rev = q[::-1]
        if reward < 0.999:
            cut = max(1, int(len(rev) * reward))
            rev = rev[:cut] + q[cut:][: len(rev) - cut]
        tr.add("assistant", rev, reasoning="Reverse it character by character.", finish=finish)
    else:
        final = answer if good else ("0" if answer != "0" else "1")
        tr.add("assistant", f"**Answer:** $\\boxed{{{final}}}$", reasoning=f"So the task boils down to: {q} "
               "Let me work through it step by step and double check the arithmetic.", finish=finish,
               max_tokens=e.max_tokens)
    agent_end = tr.t
    fin_end = agent_end + rng.uniform(0.05, 0.3)
    score_end = fin_end + rng.uniform(0.005, 0.05)
    arrival = score_end + rng.uniform(0.01, 0.2)
    n_in = sum(c["usage"]["prompt_tokens"] for c in tr.calls)
    n_out = sum(c["usage"]["completion_tokens"] for c in tr.calls)
    trace_id = _uuid(rng)
    stop = "agent_completed"
    trace = {
        "version": 1, "id": trace_id, "verifiers": {"version": "0.4.0"}, "task": task,
        "agent": {"config": {"model": spec.model, "client": {"base_url": "http://localhost:8000/v1", "type": kind,
                                                             "renderer_model_name": spec.model},
                             "sampling": {"temperature": 1.0, "top_p": 1.0, "max_tokens": e.max_tokens},
                             "max_turns": 6 if tools else 1},
                  "name": "agent", "trainable": True},
        "tools": tools, "nodes": tr.nodes, "calls": tr.calls, "mm_token_type_id_map": {}, "request_rewrites": [],
        "response_rewrites": [], "rewards": {e.reward: {"score": round(float(reward), 4), "weight": 1.0}},
        "metrics": metrics,
        "info": {"kind": kind, "dispatch": {"step": policy, "time": round(t_dispatch, 4)},
                 "arrival": {"step": step if kind == "train" else policy, "time": round(arrival, 4)}},
        "extra_usage": [], "is_completed": True, "ok": True, "stop_condition": stop, "is_timeout": False, "errors": [],
        "timing": {"start": round(t_dispatch, 4), "boot": {"start": round(t_dispatch + 0.01, 4), "end": round(boot_end, 4)},
                   "setup": {"start": round(boot_end, 4), "end": round(setup_end, 4)},
                   "agent": {"start": round(setup_end, 4), "end": round(agent_end, 4),
                             "model": {"duration": round(sum(c["time"]["end"] - c["time"]["start"] for c in tr.calls), 4)},
                             "harness": {"duration": round(max(agent_end - setup_end - sum(c["time"]["end"] - c["time"]["start"] for c in tr.calls), 0.0), 4)}},
                   "finalize": {"start": round(agent_end, 4), "end": round(fin_end, 4)},
                   "scoring": {"start": round(fin_end, 4), "end": round(score_end, 4)}},
        "num_input_tokens": n_in, "num_output_tokens": n_out, "num_total_tokens": n_in + n_out,
    }
    ep.update({"ok": True, "is_timeout": False, "errors": [], "traces": [trace], "num_input_tokens": n_in,
               "num_output_tokens": n_out, "num_total_tokens": n_in + n_out})
    index = {**base, "trace_ids": [trace_id], "ok": True, "num_errors": 0, "reward": round(float(reward), 4),
             "input_tokens": n_in, "output_tokens": n_out,
             "turns": sum(1 for nd in tr.nodes if nd["message"]["role"] == "assistant"), "branches": 1,
             "stop_condition": stop, "truncated": truncated, "dispatch": round(t_dispatch, 4),
             "arrival": round(arrival, 4), "duration": round(arrival - t_dispatch, 4)}
    return ep, index


def _orch_annotation(ep: dict, ship_step: int, ship_time: float, advantage: float | None) -> tuple[str, dict] | None:
    """The orch annotation of a shipped episode (spec 5.6): train episodes carry a scalar advantage
    and a full-length `advantages` stream over the branch; eval epochs ship with no streams."""
    if not ep["traces"]:
        return None
    tr = ep["traces"][0]
    info = {"effective": True, "ship": {"step": ship_step, "time": round(ship_time, 4)}}
    branches = []
    if advantage is not None:
        info["advantage"] = round(advantage, 4)
        branches = [{"index": 0, "advantages": [round(advantage, 4) if m else 0.0 for nd in tr["nodes"] for m in nd["mask"]]}]
    rec = {"version": 1, "trace_id": tr["id"], "info": info, "branches": branches}
    return json.dumps(rec, separators=(",", ":")) + "\n", {"trace_id": tr["id"], "info": info}


class _TraceStream:
    """Builds `traces/stream/00000.jsonl` + index and the orch annotation chunk + index in memory."""

    def __init__(self, first_line: int = 1, offset: int = 0, ann_offset: int = 0):
        self.line = first_line
        self.offset = offset
        self.ann_offset = ann_offset
        self.chunk: list[str] = []
        self.index: list[str] = []
        self.ann: list[str] = []
        self.ann_index: list[str] = []

    def add(self, ep: dict, index_row: dict, ann: tuple[str, dict] | None = None) -> None:
        line = json.dumps(ep, separators=(",", ":")) + "\n"
        row = {"line": self.line, "chunk": 0, "offset": self.offset, **index_row}
        self.chunk.append(line)
        self.index.append(json.dumps(row, separators=(",", ":")) + "\n")
        self.offset += len(line.encode())
        self.line += 1
        if ann is not None:
            text, meta = ann
            self.ann.append(text)
            self.ann_index.append(json.dumps({"trace_id": meta["trace_id"], "chunk": 0, "offset": self.ann_offset,
                                              "info": meta["info"]}, separators=(",", ":")) + "\n")
            self.ann_offset += len(text.encode())


def _episodes_for_step(sim: _Sim, step: int, attempt: int, t_ship: float, count: int,
                       kind: str = "train") -> list[tuple[float, dict, dict, tuple | None]]:
    """About `count` episodes of one step (one GRPO group per env) shipped at `t_ship`:
    (arrival, record, index row, orch annotation) tuples."""
    s = sim.s
    rng = sim.rng(step, attempt, 6, count, kind == "eval")
    envs = s.train_envs if kind == "train" else s.eval_envs
    per = max(1, count // len(envs))
    built = []
    for env in envs:
        group = _uuid(rng, dashed=True)
        qi = int(rng.integers(0, 1000))
        p = sim.reward_p(env, step)
        specs = []
        for _ in range(per):
            t_d = t_ship - s.step_s * rng.uniform(0.9, 1.6)
            if kind == "train" and rng.random() < 0.07:
                err = (("SandboxError", "sandbox provisioning failed: create timed out after 600s (status PENDING)")
                       if env == "math-python" else
                       ("EnvError", f"env server {env} worker exited unexpectedly (BrokenProcessPool)"))
                specs.append((t_d, 0.0, err, False))
                continue
            r = float(rng.random() < p) if _ENVS[env].binary else float(np.clip(rng.beta(p * 7, (1 - p) * 7), 0, 1))
            trunc = bool(rng.random() < 0.05)
            if trunc and _ENVS[env].binary:
                r = 0.0
            specs.append((t_d, r, None, trunc))
        mean = float(np.mean([x[1] for x in specs]))
        for t_d, r, err, trunc in specs:
            ep, idx = _episode(s, rng, env, step, kind, t_d, group, r, qi, error=err, truncated=trunc)
            ann = _orch_annotation(ep, step, t_ship, r - mean if kind == "train" else None)
            built.append((idx["arrival"], ep, idx, ann))
    return built


# --------------------------------------------------------------------------------------------------
# Writing a run directory
# --------------------------------------------------------------------------------------------------

class _Files:
    """Writes files under a run dir and remembers each one's intended mtime; `finish` applies them."""

    def __init__(self, run_dir: Path):
        self.dir = run_dir
        self.mtimes: dict[str, float] = {}

    def text(self, rel: str, data: str | list[str], mtime: float) -> None:
        p = self.dir / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        with open(p, "w", encoding="utf-8", newline="") as fh:
            fh.write(data if isinstance(data, str) else "".join(data))
        self.mtimes[rel] = mtime

    def json(self, rel: str, obj, mtime: float) -> None:
        self.text(rel, json.dumps(obj, indent=2) + "\n", mtime)

    def link(self, rel: str, target: str, mtime: float) -> None:
        """A relative symlink made like prime-rl: a temporary `.target` link renamed over `rel`."""
        p = self.dir / rel
        tmp = p.parent / f".{target}"
        os.symlink(target, tmp)
        os.replace(tmp, p)
        self.mtimes[rel] = mtime

    def finish(self) -> None:
        dirs: dict[str, float] = {}
        for rel, t in self.mtimes.items():
            os.utime(self.dir / rel, (t, t), follow_symlinks=False)
            parts = rel.split("/")
            for i in range(len(parts)):
                d = "/".join(parts[:i])
                dirs[d] = max(dirs.get(d, t), t)
        for d in sorted(dirs, key=lambda x: -x.count("/") - (x != "")):
            os.utime(self.dir / d if d else self.dir, (dirs[d], dirs[d]))


def _rl_configs(f: _Files, spec: _RL, attempt: int, t: float, *, resume_step: int | None = None) -> None:
    envs = "+".join(spec.train_envs)
    cmd = f"uv run rl @ {spec.toml_path}"
    if resume_step is not None:
        cmd += f" --run.name {spec.name} --resume"
    base = f"configs/attempt_{attempt}"
    f.text(f"{base}/command.txt", cmd + "\n", t)
    toml = [f"# {envs} RL on {spec.model.split('/')[-1]}\n", f"max_steps = {spec.max_steps}\n", "\n[model]\n",
            f'name = "{spec.model}"\n', "\n[orchestrator]\n", f"batch_size = {spec.batch_size}\n",
            f"rollouts_per_example = {spec.k}\n", "async_level = 1\n"]
    for env in spec.train_envs:
        toml += ["\n[[orchestrator.train.source]]\n", f'env = {{ id = "{env}" }}\n']
    toml += ["\n[orchestrator.eval]\n", f"interval = {spec.eval_interval}\n"]
    for env in spec.eval_envs:
        toml += ["\n[[orchestrator.eval.source]]\n", f'env = {{ id = "{env}" }}\n',
                 f"num_examples = {spec.eval_examples}\n", f"rollouts_per_example = {spec.eval_k}\n"]
    toml += ["\n[trainer.optim]\n", f"lr = {spec.lr:g}\n", "\n[trainer.scheduler]\n", 'type = "cosine"\n',
             f"warmup_steps = {spec.warmup}\n", "\n[ckpt]\n", f"interval = {spec.ckpt_interval}\n", "\n[deployment]\n",
             f"num_train_gpus = {spec.gpus_train}\n", f"num_infer_gpus = {spec.gpus_infer}\n"]
    f.text(f"{base}/rl.toml", "".join(toml), t)
    out_dir = f"outputs/{spec.name}"
    monitors = {"file": {"path": "metrics.jsonl", "chunk_bytes": 5368709120, "compress": True, "float_decimals": 4},
                "wandb": None}
    log = {"level": "info", "json_logging": False}
    ckpt = {"interval": spec.ckpt_interval, "resume_step": resume_step}
    orch = {
        "model": {"name": spec.model}, "max_steps": spec.max_steps, "batch_size": spec.batch_size,
        "rollouts_per_example": spec.k, "async_level": 1, "max_off_policy_steps": 2, "seed": 42, "seq_len": 8192,
        "train": {"source": [{"env": {"id": e, "args": {}}, "name": e, "weight": 1.0} for e in spec.train_envs],
                  "sampling": {"temperature": 1.0, "top_p": 1.0, "max_tokens": max(_ENVS[e].max_tokens for e in spec.train_envs)}},
        "eval": {"interval": spec.eval_interval, "eval_base_model": True,
                 "source": [{"env": {"id": e, "args": {}}, "name": e, "num_examples": spec.eval_examples,
                             "rollouts_per_example": spec.eval_k} for e in spec.eval_envs],
                 "sampling": {"temperature": 0.6, "top_p": 0.95, "max_tokens": 4096}},
        "client": {"base_url": ["http://localhost:8000/v1"], "timeout": 1200}, "ckpt": ckpt, "output_dir": out_dir,
        "monitors": monitors, "log": log,
    }
    trainer = {
        "model": {"name": spec.model, "seq_len": 8192, "attn": "flash_attention_2", "compile": False, "impl": "hf"},
        "optim": {"type": "adamw", "lr": spec.lr, "weight_decay": 0.01, "betas1": 0.9, "betas2": 0.999, "max_norm": 1.0},
        "scheduler": {"type": "cosine", "warmup_steps": spec.warmup, "min_lr_ratio": 0.1},
        "loss": {"type": "ipo", "eps": 0.2, "ratio_type": "token", "mask_ratio_high": 8.0, "mask_ratio_low": 0.125},
        "ckpt": {**ckpt, "keep_last": 2}, "max_steps": spec.max_steps, "output_dir": out_dir, "monitors": monitors,
        "log": log, "data": {"micro_batch_size": 1}, "dist": {"dp_shard": spec.gpus_train, "cp": 1, "tp": 1},
    }
    inference = {"model": {"name": spec.model, "dtype": "auto", "max_model_len": 8192, "enable_auto_tool_choice": True,
                           "tool_call_parser": "hermes", "reasoning_parser": "qwen3"},
                 "server": {"host": "0.0.0.0", "port": 8000}, "parallel": {"tp": 1, "dp": spec.gpus_infer},
                 "gpu_memory_utilization": 0.9, "enable_prefix_caching": True, "log": {"level": "info"}}
    f.json(f"{base}/resolved/orchestrator.json", orch, t)
    f.json(f"{base}/resolved/trainer.json", trainer, t)
    f.json(f"{base}/resolved/inference.json", inference, t)
    port = 5501
    for split, envs_ in (("train", spec.train_envs), ("eval", spec.eval_envs)):
        for env in envs_:
            rel = f"{base}/resolved/envs/{split}/{env}"
            f.json(rel + ".json", {"env": {"id": env, "args": {}}, "serve": {"workers": 4, "max_concurrent": 64},
                                   "address_file": f"{out_dir}/{rel}.address", "log": log}, t)
            f.text(rel + ".address", f"tcp://127.0.0.1:{port}", t)
            port += 1


@dataclass
class _Attempt:
    number: int
    first_step: int
    last_step: int  # last step with trainer + orch rows
    resume_from: int | None = None
    crash: bool = False
    finished: bool = False
    t_start: float = 0.0
    t_end: float = 0.0


@dataclass
class _RLOut:
    """Simulated events with relative times; rendered (shifted to wall-clock) when written."""

    rows: list[tuple] = field(default_factory=list)  # (t, seq, step, values, producer)
    logs: dict[str, list[tuple]] = field(default_factory=dict)  # rel -> [(t, seq, kind, payload)]
    traces: list[tuple] = field(default_factory=list)  # (step, attempt, t_ship, count, kind)
    last_trainer_step: int = 0

    def row(self, t: float, step: int | None, values: dict, producer: str = "orch") -> None:
        self.rows.append((t, len(self.rows), step, values, producer))

    def log(self, rel: str, t: float, kind: str, *payload) -> None:
        events = self.logs.setdefault(rel, [])
        events.append((t, len(events), kind, payload))


def _render_log(t: float, kind: str, payload: tuple) -> str:
    if kind == "loguru":
        return _loguru(t, *payload)
    if kind == "vllm":
        return _vllm(t, *payload)
    if kind == "access":
        return _access(*payload)
    return _plain(t, *payload)


def _trainer_log_line(step: int, lg: dict) -> str:
    return (f"Step {step} | Time: {lg['time']:.2f}s | Loss: {lg['loss']:.4f} | Entropy: {lg['entropy']:.4f} | "
            f"Mismatch KL: {lg['kl']:.4f} | Grad. Norm: {lg['gn']:.4f} | LR: {lg['lr']:.2e} | "
            f"Throughput: {lg['thr']:.0f} tokens/s | MFU: {lg['mfu']:.1f}% | Peak Mem.: {lg['mem']:.1f} GiB")


def _orch_log_line(step: int, sm: dict) -> str:
    return (f"Step {step} | Time: {sm['time']:.2f}s | Reward: {sm['reward']:.4f} | "
            f"Throughput: {sm['tokens'] / sm['time']:.1f} tokens/s | Seq. Length: {sm['seq']:.1f} tokens/sample | "
            f"Async Level: 1 | Max. Off-Policy Level: 1")


_OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.82 GiB. GPU 1 has a total capacity of 79.19 GiB "
        "of which 2.41 GiB is free. Including non-PyTorch memory, this process has 76.77 GiB memory in use.")


def _simulate_attempt(sim: _Sim, out: _RLOut, att: _Attempt, cum: dict, trace_steps: set[int]) -> None:
    """Rows, log lines and trace requests of one attempt, starting at `att.t_start`; sets `att.t_end`."""
    s = sim.s
    a = att.number
    L = f"logs/attempt_{a}"
    TR, OR, INF = f"{L}/trainer.log", f"{L}/orchestrator.log", f"{L}/inference.log"
    t = att.t_start
    rng = sim.rng(a, 99)
    out.log(TR, t, "loguru", "INFO", "Starting RL trainer")
    out.log(TR, t + 0.4, "loguru", "INFO", f"Initializing model {s.model} (FSDP dp_shard={s.gpus_train}, cp=1)")
    t_loaded = t + rng.uniform(15, 25)
    out.log(TR, t_loaded, "loguru", "INFO", f"Loaded model in {t_loaded - t - 0.4:.2f}s")
    if att.resume_from is not None:
        out.log(TR, t_loaded + 1, "loguru", "INFO", f"Loading checkpoint from checkpoints/step_{att.resume_from}/trainer")
        out.log(TR, t_loaded + 9, "loguru", "INFO", f"Resumed from step {att.resume_from} in 8.37s")
        out.log(OR, t + 2, "loguru", "INFO", f"Resuming from checkpoint step {att.resume_from} "
                                             f"(checkpoints/step_{att.resume_from}/orchestrator)")
    msgs = ["Starting orchestrator", f"Logging metrics and episodes to the local filesystem (outputs/{s.name})",
            f"Loading tokenizer for {s.model}"]
    msgs += [f"Env server {e} (train) is up at tcp://127.0.0.1:{5501 + i}" for i, e in enumerate(s.train_envs)]
    msgs += [f"Env server {e} (eval) is up at tcp://127.0.0.1:{5501 + len(s.train_envs) + i}" for i, e in enumerate(s.eval_envs)]
    msgs += ["Waiting for inference pool to be ready"]
    for i, msg in enumerate(msgs):
        out.log(OR, t + 0.3 * i, "loguru", "INFO", msg)
    t_ready = t + rng.uniform(50, 80)
    out.log(OR, t_ready, "loguru", "INFO", f"Inference pool is ready ({s.gpus_infer} servers)")
    out.log(OR, t_ready + 2, "loguru", "INFO", f"Starting orchestrator loop (max_steps={s.max_steps}, async_level=1)")
    for i, msg in enumerate(["Automatically detected platform cuda.", "vLLM API server version 0.10.2",
                             f"non-default args: {{'model': '{s.model}', 'enable_auto_tool_choice': True, "
                             "'tool_call_parser': 'hermes', 'reasoning_parser': 'qwen3', 'max_model_len': 8192, "
                             f"'enable_prefix_caching': True, 'data_parallel_size': {s.gpus_infer}}}",
                             "Resolved architecture: Qwen3ForCausalLM",
                             f"Model loading took {2 * s.params_b + 0.4:.4f} GiB and 4.201 seconds",
                             "Starting vLLM API server 0 on http://0.0.0.0:8000"]):
        out.log(INF, t + 0.5 + i * 6, "vllm", msg, 3134, "api_server.py:1805")
    for split, envs in (("train", s.train_envs), ("eval", s.eval_envs)):
        for i, env in enumerate(envs):
            rel = f"{L}/envs/{split}/{env}.log"
            port = 5501 + i + (len(s.train_envs) if split == "eval" else 0)
            out.log(rel, t + 0.2, "plain", f"verifiers.v1.serve.server: EnvServer {env} listening on tcp://127.0.0.1:{port} (workers=4)")
            out.log(rel, t + 1.2, "plain", f"verifiers.v1.serve.pool: spawned 4 workers for {env}")

    eval_windows: list[tuple[float, float]] = []
    policy_times: list[tuple[float, int]] = [(t_ready, att.first_step - 1)]

    def do_eval(step: int, t_at: float) -> float:
        t_end = t_at
        for env in s.eval_envs:
            out.log(OR, t_at, "loguru", "INFO", f"Running eval for {env} at step {step} "
                                                f"({s.eval_examples} examples x {s.eval_k} rollouts)")
            row, sm = sim.eval_row(env, step, a)
            dur = float(sim.rng(step, a, 8).uniform(20, 45))
            t_end = t_at + dur
            out.row(t_end, step, row)
            out.log(OR, t_end, "loguru", "SUCCESS", f"Evaluated {env} at step {step} | avg@{s.eval_k}: {sm['avg']:.4f} | "
                                                    f"pass@{s.eval_k}: {sm['pass']:.4f} | Time: {dur:.2f}s")
            if step in trace_steps:
                out.traces.append((step, a, t_end, 4, "eval"))
        eval_windows.append((t_at, t_end))
        return t_end

    t_o = t_ready + 3
    if att.first_step == 1 and s.eval_envs:
        t_o = do_eval(0, t_o) + 1
    t_tr = t_o  # when the trainer finished its previous step
    t_tr_hist = {att.first_step - 1: t_o, att.first_step - 2: t_o}
    for step in range(att.first_step, att.last_step + 1):
        orch, sm = sim.orch_row(step, a, cum)
        # async_level=1: rollouts for `step` need the policy of step-2 to be out of the trainer
        t_o = max(t_o, t_tr_hist.get(step - 2, t_o)) + sm["time"]
        out.row(t_o, step, orch)
        out.log(OR, t_o, "loguru", "SUCCESS", _orch_log_line(step, sm))
        wait = max(t_o - t_tr, 0.0)
        rows, lg = sim.trainer_rows(step, a, sm, wait=wait)
        t_tr = max(t_tr, t_o) + lg["busy"]
        t_tr_hist[step] = t_tr
        out.log(TR, t_o + 0.05, "loguru", "INFO", f"Received training batch for step {step} ({int(sm['n'])} samples)")
        for i, r in enumerate(rows):
            out.row(t_tr + i * 0.001, step, r, "trainer")
        out.log(TR, t_tr, "loguru", "SUCCESS", _trainer_log_line(step, lg))
        out.log(INF, t_tr - lg["ckpt"] - 0.5, "access", "/update_weights")
        if lg["ckpt"]:
            out.log(TR, t_tr - lg["ckpt"], "loguru", "INFO", f"Saving checkpoint at step {step}")
            out.log(TR, t_tr, "loguru", "INFO", f"Saved checkpoint to checkpoints/step_{step} in {lg['ckpt']:.2f}s")
            out.log(OR, t_o + 0.1, "loguru", "INFO", f"Saving orchestrator checkpoint to checkpoints/step_{step}/orchestrator")
        if lg["gn"] > 0.7:
            out.log(TR, t_tr + 0.01, "loguru", "WARNING", f"Gradient norm {lg['gn']:.3f} at step {step} is well above "
                                                          f"its running average (x{lg['gn'] / 0.2:.1f})")
        rr = sim.rng(step, a, 9)
        if rr.random() < 0.02:
            out.log(OR, t_o - 3, "loguru", "WARNING", f"[verifiers] model call failed: id={_uuid(rr)} ProviderError: "
                    "Error code: 503 - {'object': 'error', 'message': 'Service Unavailable: engine is sleeping for weight update'}")
        if step in trace_steps:
            out.traces.append((step, a, t_o, 4, "train"))
        policy_times.append((t_tr, step))
        out.last_trainer_step = step
        if step % s.eval_interval == 0 and s.eval_envs:
            t_o = do_eval(step, t_o + 0.5)
    t_end = max(t_o, t_tr)
    for tt in np.arange(t + 40, t_end, 30.0):  # vLLM engine stats
        r = sim.rng(a, int(tt - t), 10)
        out.log(INF, float(tt), "vllm", f"Engine 000: Avg prompt throughput: {r.uniform(2000, 6000):.1f} tokens/s, "
                f"Avg generation throughput: {r.uniform(400, 1400):.1f} tokens/s, Running: {int(r.integers(3, 16))} reqs, "
                f"Waiting: 0 reqs, GPU KV cache usage: {r.uniform(5, 60):.1f}%, Prefix cache hit rate: {r.uniform(55, 85):.1f}%")
    for tt, r in sim.inference_rows(np.arange(t_ready + 1.0, t_end, INF_EVERY_S), a * 1000 + 1):
        out.row(tt, None, r)
    pt = np.array([p[0] for p in policy_times])
    pv = [p[1] for p in policy_times]
    for tt, r in sim.dispatcher_rows(np.arange(t_ready + 1.4, t_end, DISPATCH_EVERY_S), a * 1000 + 2,
                                     lambda x: pv[max(int(np.searchsorted(pt, x, side="right")) - 1, 0)],
                                     lambda x: any(lo <= x <= hi for lo, hi in eval_windows)):
        out.row(tt, None, r)
    if att.crash:
        tc = t_end + 9
        tb = ("Training failed with an uncaught exception\nTraceback (most recent call last):\n"
              '  File "/workspace/prime-rl/src/prime_rl/trainer/rl/train.py", line 418, in train\n    loss.backward()\n'
              '  File "/workspace/prime-rl/.venv/lib/python3.12/site-packages/torch/_tensor.py", line 647, in backward\n'
              "    torch.autograd.backward(\n" + _OOM)
        out.log(TR, tc - 8, "loguru", "INFO", f"Received training batch for step {att.last_step + 1} ({s.batch_size} samples)")
        out.log(TR, tc, "loguru", "ERROR", tb)
        out.log(OR, tc + 30, "loguru", "WARNING", f"Waiting for policy step {att.last_step} (no new checkpoint for 30.0s)")
        out.log(OR, tc + 31, "loguru", "ERROR", "Trainer process exited with code 1; shutting down")
        t_end = tc + 31
    if att.finished:
        out.log(TR, t_end + 1, "loguru", "SUCCESS", f"Finished training after {att.last_step} steps")
        out.log(OR, t_end + 1, "loguru", "SUCCESS", "Orchestrator finished.")
        t_end += 1
    att.t_end = t_end


RELAUNCH_GAP_S = 480.0


def _write_rl_run(out_dir: Path, spec: _RL, attempts: list[_Attempt], t_end: float, trace_steps: set[int],
                  *, with_traces: bool) -> Path:
    """Simulate the attempts back to back (relative times), shift them so the last event lands at
    `t_end`, and write the run directory with matching file mtimes."""
    sim = _Sim(spec)
    out = _RLOut()
    cum: dict = {}
    t = 0.0
    for att in attempts:
        att.t_start = t
        _simulate_attempt(sim, out, att, cum, trace_steps if with_traces else set())
        t = att.t_end + RELAUNCH_GAP_S
    shift = t_end - attempts[-1].t_end
    for att in attempts:
        att.t_start += shift
        att.t_end += shift
    run = out_dir / spec.name
    f = _Files(run)
    for att in attempts:
        _rl_configs(f, spec, att.number, att.t_start, resume_step=att.resume_from)
    last = attempts[-1].number
    f.link("configs/latest", f"attempt_{last}", attempts[-1].t_start)
    ends = {att.number: att.t_end for att in attempts}
    for rel, events in out.logs.items():
        events.sort(key=lambda e: (e[0], e[1]))
        lines = [_render_log(ev[0] + shift, ev[2], ev[3]) for ev in events]
        f.text(rel, lines, ends[int(rel.split("/")[1].split("_")[1])])
    f.link("logs/latest", f"attempt_{last}", attempts[-1].t_start)
    out.rows.sort(key=lambda r: (r[0], r[1]))
    f.text("monitors/file/metrics.jsonl", [_row(step, tt + shift, values, prod) for tt, _i, step, values, prod in out.rows], t_end)
    plan = {env: {str(st): spec.eval_examples * spec.eval_k for st in range(0, spec.max_steps + 1, spec.eval_interval)}
            for env in spec.eval_envs}
    f.json("monitors/file/plan.json", plan, attempts[0].t_start)
    f.text("trainer_step", str(out.last_trainer_step), t_end)
    if with_traces:
        built = []
        for step, a, t_ship, count, kind in out.traces:
            built += _episodes_for_step(sim, step, a, t_ship + shift, count, kind)
        built.sort(key=lambda b: b[0])
        stream = _TraceStream()
        for _arrival, ep, idx, ann in built:
            stream.add(ep, idx, ann)
        f.text("monitors/file/traces/stream/00000.jsonl", stream.chunk, t_end)
        f.text("monitors/file/traces/stream.index.jsonl", stream.index, t_end)
        f.text("monitors/file/traces/annotations/orch/00000.jsonl", stream.ann, t_end)
        f.text("monitors/file/traces/annotations/orch.index.jsonl", stream.ann_index, t_end)
    if any(att.crash for att in attempts):
        crashed = next(att for att in attempts if att.crash)
        tdir = f"logs/attempt_{crashed.number}/trainer/torchrun/88fcf936/attempt_0"
        for rank in (0, 1):
            f.text(f"{tdir}/{rank}/stdout.log", "", crashed.t_end)
        f.text(f"{tdir}/0/stderr.log", "", crashed.t_end)
        f.text(f"{tdir}/1/stderr.log", "Training failed with an uncaught exception\nTraceback (most recent call last):\n"
               '  File "/workspace/prime-rl/src/prime_rl/trainer/rl/train.py", line 418, in train\n    loss.backward()\n'
               + _OOM + "\n", crashed.t_end)
        resumed = attempts[-1]
        f.text("reports/resume-after-oom.md",
               "---\ntitle: Resume after CUDA OOM\n---\n\n# Resume after CUDA OOM\n\n"
               f"Attempt {crashed.number} died in `loss.backward()` on rank 1 while training step {crashed.last_step + 1} "
               "(CUDA out of memory on long reasoning traces).\n\n"
               f"Attempt {resumed.number} resumed from `checkpoints/step_{resumed.resume_from}`, so steps "
               f"{resumed.resume_from + 1}..{crashed.last_step} were trained twice. The run was then stopped by hand at "
               f"step {resumed.last_step} to free the GPUs.\n", t_end)
    f.finish()
    return run


# --------------------------------------------------------------------------------------------------
# SFT run
# --------------------------------------------------------------------------------------------------

def _write_sft_run(out_dir: Path, t_end: float) -> Path:
    rng = np.random.default_rng([SEED, 4])
    model = "Qwen/Qwen3-0.6B"
    data_name = "willcb/R1-reverse-wikipedia-paragraphs-v1-1000"
    steps, warmup, lr, val_every, ckpt_every = SFT_STEPS, 15, 2e-5, 25, 100
    step_t = 3.2 * rng.lognormal(0, 0.08, steps + 1)
    t0 = t_end - float(step_t.sum()) - 60.0
    run = out_dir / SFT_NAME
    f = _Files(run)
    base = "configs/attempt_1"
    f.text(f"{base}/command.txt", "uv run sft @ examples/reverse_text/sft.toml\n", t0)
    f.text(f"{base}/sft.toml", f'max_steps = {steps}\n\n[model]\nname = "{model}"\n\n[data]\nname = "{data_name}"\n'
           f"batch_size = 32\nseq_len = 4096\n\n[optim]\nlr = {lr:g}\n\n[scheduler]\ntype = \"cosine\"\n"
           f"warmup_steps = {warmup}\n\n[val]\ninterval = {val_every}\n\n[ckpt]\ninterval = {ckpt_every}\n", t0)
    f.json(f"{base}/resolved/sft.json", {
        "model": {"name": model, "seq_len": 4096, "attn": "flash_attention_2", "impl": "hf"},
        "data": {"type": "sft", "name": data_name, "split": "train", "batch_size": 32, "micro_batch_size": 4,
                 "seq_len": 4096, "shuffle": True, "num_examples": 1000},
        "val": {"interval": val_every, "data": {"name": data_name, "split": "validation"}},
        "optim": {"type": "adamw", "lr": lr, "weight_decay": 0.01, "max_norm": 1.0},
        "scheduler": {"type": "cosine", "warmup_steps": warmup, "min_lr_ratio": 0.0},
        "ckpt": {"interval": ckpt_every, "keep_last": 1}, "max_steps": steps, "output_dir": f"outputs/{SFT_NAME}",
        "monitors": {"file": {"path": "metrics.jsonl"}, "wandb": None}, "log": {"level": "info", "json_logging": False},
    }, t0)
    f.link("configs/latest", "attempt_1", t0)
    lines: list[str] = []
    log = [_loguru(t0, "INFO", "Starting SFT trainer"),
           _loguru(t0 + 0.5, "INFO", f"Initializing model {model} (FSDP dp_shard=1)"),
           _loguru(t0 + 12, "INFO", f"Loaded dataset {data_name} (1000 examples, 31.2M tokens)")]
    t = t0 + 60.0
    samples = tokens = 0
    for step in range(1, steps + 1):
        dt = float(step_t[step])
        t += dt
        cur_lr = lr * step / warmup if step <= warmup else lr * 0.5 * (1 + np.cos(np.pi * (step - warmup) / (steps - warmup)))
        loss = 0.55 + 1.35 * np.exp(-step / 35) + rng.normal(0, 0.035)
        gn = (0.9 * np.exp(-step / 60) + 0.35) * rng.lognormal(0, 0.15)
        if rng.random() < 0.03:
            gn *= rng.uniform(3, 6)
        n_tok = float(rng.integers(110_000, 131_072))
        samples += 32
        tokens += n_tok
        fb = dt * 0.86
        ckpt = float(rng.uniform(4, 7)) if step % ckpt_every == 0 else 0.0
        thr = n_tok / dt
        rows = [
            {"perf/throughput": thr, "perf/throughput_per_gpu": thr, "perf/mfu": 6 * 0.6e9 * thr / 989e12 * 100,
             "perf/peak_memory": 21.5 * rng.uniform(0.97, 1.03)},
            {"optim/lr": cur_lr, "optim/grad_norm": gn},
            {"loss/mean": loss, "loss/perplexity": float(np.exp(loss)), "loss/nan_count": 0.0},
            {"progress/epoch": samples / 1000, "progress/num_samples": float(samples), "progress/num_tokens": tokens},
            {"time/step": dt + ckpt, "time/forward_backward": fb, "time/save_ckpt": ckpt},
            {"system/ckpt_disk_free_gib": 790.0 - 1.2 * (step // ckpt_every), "system/ckpt_disk_total_gib": 2012.1},
        ]
        for i, r in enumerate(rows):
            lines.append(_row(step, t + i * 0.001, r, "trainer"))
        log.append(_loguru(t, "SUCCESS", f"Step {step} | Time: {dt:.2f}s | Loss: {loss:.4f} | Grad. Norm: {gn:.4f} | "
                                         f"LR: {cur_lr:.2e} | Throughput: {thr:.0f} tokens/s | Peak Mem.: {rows[0]['perf/peak_memory']:.1f} GiB"))
        if step % val_every == 0:
            vl = 0.62 + 1.2 * np.exp(-step / 40) + 0.0004 * max(step - 150, 0) + rng.normal(0, 0.01)
            t += 4.0
            lines.append(_row(step, t, {"val/loss": vl, "val/perplexity": float(np.exp(vl))}, "trainer"))
            log.append(_loguru(t, "INFO", f"Validation at step {step} | Loss: {vl:.4f} | Perplexity: {np.exp(vl):.3f}"))
        if ckpt:
            log.append(_loguru(t + ckpt, "INFO", f"Saved checkpoint to checkpoints/step_{step} in {ckpt:.2f}s"))
    log.append(_loguru(t + 1, "SUCCESS", f"Finished training after {steps} steps"))
    t_last = max(t + 1, t_end)
    f.text("logs/attempt_1/trainer.log", log, t_last)
    f.link("logs/latest", "attempt_1", t0)
    f.text("monitors/file/metrics.jsonl", lines, t_last)
    f.text("trainer_step", str(steps), t_last)
    f.finish()
    return run


# --------------------------------------------------------------------------------------------------
# Public API: demo_root / ensure_demo
# --------------------------------------------------------------------------------------------------

def _can_create(path: Path) -> bool:
    """Could `path` be created (or written, if it exists)? Checks the nearest existing ancestor;
    creates nothing."""
    p = path
    while not os.path.lexists(p):
        if p.parent == p:
            return False
        p = p.parent
    return p.is_dir() and os.access(p, os.W_OK | os.X_OK)


def demo_root() -> Path:
    """`$RUNDASH_CACHE_DIR/demo`, else `~/.cache/rundash/demo`, else a folder under the temp dir."""
    env = os.environ.get("RUNDASH_CACHE_DIR")
    candidates: list[Path] = []
    if env:
        candidates.append(Path(env).expanduser() / "demo")
    else:
        try:
            candidates.append(Path.home() / ".cache" / "rundash" / "demo")
        except (RuntimeError, KeyError):
            pass
    uid = os.getuid() if hasattr(os, "getuid") else "user"
    candidates.append(Path(tempfile.gettempdir()) / f"rundash-{uid}" / "demo")
    for c in candidates:
        if _can_create(c):
            return c.absolute()
    return candidates[-1].absolute()


def _read_marker(root: Path) -> dict | None:
    try:
        with open(root / MARKER, encoding="utf-8") as fh:
            value = json.load(fh)
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _is_current(root: Path, now: float | None) -> bool:
    marker = _read_marker(root)
    if marker is None or marker.get("version") != DEMO_VERSION:
        return False
    if not all((root / name / "monitors" / "file" / "metrics.jsonl").is_file() for name in RUN_NAMES.values()):
        return False
    written = marker.get("written")
    if _writer_alive(root) or not isinstance(written, (int, float)):
        return True
    age = (time.time() if now is None else now) - written
    return age <= REFRESH_AFTER_S


def _is_ours(root: Path) -> bool:
    """An existing folder may be replaced only if it is a demo folder (any version) or empty."""
    if not root.is_dir() or root.is_symlink():
        return False
    if (root / MARKER).exists():
        return True
    try:
        return not any(root.iterdir())
    except OSError:
        return False


_DEMO_LOCK = threading.RLock()


def _write_all(out: Path, now: float) -> None:
    _write_rl_run(out, DONE, [_Attempt(1, 1, DONE.max_steps, finished=True)], now - 86400.0, set(), with_traces=False)
    last_eval = RESUME_LAST // RESUMED.eval_interval * RESUMED.eval_interval
    _write_rl_run(out, RESUMED, [_Attempt(1, 1, RESUME_CRASH_STEP, crash=True),
                                 _Attempt(2, RESUME_FROM + 1, RESUME_LAST, resume_from=RESUME_FROM)],
                  now - 3 * 3600.0, set(range(RESUME_CRASH_STEP - 3, RESUME_CRASH_STEP + 1))
                  | set(range(RESUME_LAST - 3, RESUME_LAST + 1)) | {last_eval}, with_traces=True)
    _write_sft_run(out, now - 2 * 86400.0)
    last_eval = LIVE_STEPS // LIVE.eval_interval * LIVE.eval_interval
    _write_rl_run(out, LIVE, [_Attempt(1, 1, LIVE_STEPS)], now, set(range(LIVE_STEPS - 6, LIVE_STEPS + 1)) | {last_eval},
                  with_traces=True)


def ensure_demo(root: str | os.PathLike | None = None, *, now: float | None = None) -> Path:
    """Write the demo runs into `root` (default `demo_root()`) unless a current copy is there.

    Returns the folder that contains the run directories (pass it to `rundash_core.discover`).
    Cheap when the demo is present: one small JSON read and four stats. A stale demo (older
    `DEMO_VERSION`, a run missing, or written more than `REFRESH_AFTER_S` ago while no live writer
    runs for it) is rewritten: into a temporary sibling folder, then renamed into place.
    """
    root = Path(root).expanduser().absolute() if root is not None else demo_root()
    with _DEMO_LOCK:
        if _is_current(root, now):
            return root
        if os.path.lexists(root) and not _is_ours(root):
            raise RuntimeError(f"{root} exists and is not a rundash demo folder; refusing to replace it")
        stop_live_writer(root)
        t = time.time() if now is None else float(now)
        root.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{root.name}.tmp-", dir=root.parent))
        try:
            _write_all(tmp, t)
            with open(tmp / MARKER, "w", encoding="utf-8") as fh:
                json.dump({"version": DEMO_VERSION, "written": t, "runs": RUN_NAMES}, fh)
            _install(tmp, root, now)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        return root


def _install(tmp: Path, root: Path, now: float | None) -> None:
    """Move the finished `tmp` folder to `root`, setting a previous copy aside first."""
    old = None
    if os.path.lexists(root):
        old = root.parent / f".{root.name}.old-{uuid.uuid4().hex[:8]}"
        try:
            os.rename(root, old)
        except FileNotFoundError:  # another process moved it meanwhile
            old = None
    try:
        os.rename(tmp, root)
    except OSError:
        if not _is_current(root, now):
            if old is not None and not os.path.lexists(root):
                os.rename(old, root)  # put the previous copy back rather than leave nothing
            raise
        # else another process installed a current copy first: keep theirs
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


# --------------------------------------------------------------------------------------------------
# Live writer
# --------------------------------------------------------------------------------------------------

_WRITERS: dict[str, "_LiveWriter"] = {}
_WRITERS_LOCK = threading.Lock()


def _key(root: str | os.PathLike | None) -> str:
    return os.path.realpath(Path(root).expanduser() if root is not None else demo_root())


def _writer_alive(root: Path) -> bool:
    with _WRITERS_LOCK:
        w = _WRITERS.get(_key(root))
        return w is not None and w.is_alive()


def _append(path: Path, data: str) -> int:
    """Append whole lines to an existing file with O_APPEND; returns the file size before."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        before = os.fstat(fd).st_size
        buf = data.encode()
        while buf:
            n = os.write(fd, buf)
            buf = buf[n:]
        return before
    finally:
        os.close(fd)


def _tail_rows(path: Path, nbytes: int = 1 << 20) -> list[dict]:
    with open(path, "rb") as fh:
        size = fh.seek(0, os.SEEK_END)
        start = max(0, size - nbytes)
        fh.seek(start)
        data = fh.read()
    lines = data.split(b"\n")
    if start > 0:
        lines = lines[1:]
    rows = []
    for raw in lines:
        try:
            row = json.loads(raw)
        except ValueError:
            continue
        if isinstance(row, dict):
            rows.append(row)
    return rows


class _LiveState:
    """Where the live run's files stand; `tick` appends one training step to all of them."""

    def __init__(self, root: Path):
        self.root = Path(os.path.realpath(root))
        self.run = self.root / LIVE.name
        self.sim = _Sim(LIVE)
        p = self.run
        self.metrics = p / "monitors" / "file" / "metrics.jsonl"
        traces = p / "monitors" / "file" / "traces"
        self.chunk = traces / "stream" / "00000.jsonl"
        self.index = traces / "stream.index.jsonl"
        self.ann = traces / "annotations" / "orch" / "00000.jsonl"
        self.ann_index = traces / "annotations" / "orch.index.jsonl"
        self.logs = p / "logs" / "attempt_1"
        self.trainer_step = p / "trainer_step"
        for path in (self.metrics, self.chunk, self.index, self.ann, self.ann_index, self.logs, self.trainer_step):
            self._inside(path)
        if not (self.root / MARKER).is_file():
            raise RuntimeError(f"{self.root} is not a rundash demo folder")
        self.fid = self._fid()
        rows = _tail_rows(self.metrics)
        steps = [r["step"] for r in rows if isinstance(r.get("step"), int)]
        self.step = max(steps) if steps else 0
        self.cum: dict = {}
        for r in reversed(rows):
            if "progress/total_tokens" in r:
                self.cum = {"tokens": r["progress/total_tokens"], "rollouts": r.get("progress/total_rollouts", 0.0),
                            "tasks": r.get("progress/total_tasks", 0.0)}
                break
        self.t_inf = max((r["time"] for r in rows if any(k.startswith("inference/") for k in r)), default=0.0)
        self.t_disp = max((r["time"] for r in rows if "dispatcher/inflight/train" in r), default=0.0)
        idx = _tail_rows(self.index, 64 << 10)
        self.line = (idx[-1]["line"] + 1) if idx else 1

    def _inside(self, path: Path) -> Path:
        """`path` if it resolves (symlinks followed) inside the demo folder; raises otherwise."""
        if not os.path.realpath(path).startswith(str(self.root) + os.sep):
            raise RuntimeError(f"{path} resolves outside the demo folder {self.root}; not writing")
        return path

    def _append(self, path: Path, data: str) -> int:
        return _append(self._inside(path), data)

    def _fid(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.metrics)
        except OSError:
            return None
        return st.st_dev, st.st_ino

    def tick(self, now: float) -> bool:
        """Append one step; False once the run reached max_steps (nothing written)."""
        if self.step >= LIVE.max_steps:
            return False
        step = self.step + 1
        sim = self.sim
        lines: list[tuple[float, str]] = []
        since = max(self.t_inf, now - 60.0)
        times = np.arange(since + INF_EVERY_S, now + 1e-9, INF_EVERY_S)
        for tt, r in sim.inference_rows(times, int(now * 10)):
            lines.append((tt, _row(None, tt, r, "orch")))
        if len(times):
            self.t_inf = float(times[-1])
        dsince = max(self.t_disp, now - 60.0)
        dtimes = np.arange(dsince + DISPATCH_EVERY_S, now + 1e-9, DISPATCH_EVERY_S)
        for tt, r in sim.dispatcher_rows(dtimes, int(now * 10) + 1, lambda _x: step - 1, lambda _x: False):
            lines.append((tt, _row(None, tt, r, "orch")))
        if len(dtimes):
            self.t_disp = float(dtimes[-1])
        t_o = now - 0.05
        orch, sm = sim.orch_row(step, 1, self.cum)
        lines.append((t_o, _row(step, t_o, orch, "orch")))
        rows, lg = sim.trainer_rows(step, 1, sm)
        for i, r in enumerate(rows):
            lines.append((now + i * 0.001, _row(step, now + i * 0.001, r, "trainer")))
        eval_log = None
        if step % LIVE.eval_interval == 0:
            for env in LIVE.eval_envs:
                row, esm = sim.eval_row(env, step, 1)
                lines.append((now + 0.01, _row(step, now + 0.01, row, "orch")))
                eval_log = _loguru(now, "SUCCESS", f"Evaluated {env} at step {step} | avg@{LIVE.eval_k}: {esm['avg']:.4f} | "
                                                   f"pass@{LIVE.eval_k}: {esm['pass']:.4f} | Time: 31.20s")
        lines.sort(key=lambda x: x[0])
        self._append(self.metrics, "".join(line for _t, line in lines))
        self._append(self.logs / "orchestrator.log", _loguru(t_o, "SUCCESS", _orch_log_line(step, sm)) + (eval_log or ""))
        self._append(self.logs / "trainer.log",
                _loguru(t_o, "INFO", f"Received training batch for step {step} ({int(sm['n'])} samples)")
                + _loguru(now, "SUCCESS", _trainer_log_line(step, lg)))
        self._append(self.logs / "inference.log", _access("/update_weights"))
        self._episode(step, now)
        tmp = self._inside(self.trainer_step.with_name(f".trainer_step.{os.getpid()}.tmp"))
        tmp.write_text(str(step))
        os.replace(tmp, self.trainer_step)
        self.step = step
        return True

    def _episode(self, step: int, now: float) -> None:
        rng = self.sim.rng(step, 1, 11)
        env = LIVE.train_envs[step % len(LIVE.train_envs)]
        p = self.sim.reward_p(env, step)
        reward = float(rng.random() < p)
        ep, idx = _episode(LIVE, rng, env, step, "train", now - LIVE.step_s * rng.uniform(0.9, 1.5),
                           _uuid(rng, dashed=True), reward, int(rng.integers(0, 1000)))
        line = json.dumps(ep, separators=(",", ":")) + "\n"
        offset = self._append(self.chunk, line)  # record first, then its index row (spec 5.1)
        self._append(self.index, json.dumps({"line": self.line, "chunk": 0, "offset": offset, **idx}, separators=(",", ":")) + "\n")
        self.line += 1
        ann = _orch_annotation(ep, step, now, reward - p)
        if ann is not None:
            off = self._append(self.ann, ann[0])
            self._append(self.ann_index, json.dumps({"trace_id": ann[1]["trace_id"], "chunk": 0, "offset": off,
                                                "info": ann[1]["info"]}, separators=(",", ":")) + "\n")


class _LiveWriter(threading.Thread):
    def __init__(self, root: Path, interval_s: float):
        super().__init__(name=f"rundash-demo-live:{root}", daemon=True)
        self.root = root
        self.interval_s = interval_s
        self.stop_event = threading.Event()
        self.steps_written = 0
        self.error: str | None = None

    def run(self) -> None:
        state = None
        while not self.stop_event.wait(self.interval_s):
            try:
                if state is None or state.fid != state._fid():  # first tick, or the demo was rewritten
                    state = _LiveState(self.root)
                if state.tick(time.time()):
                    self.steps_written += 1
            except Exception as e:  # e.g. the demo is being replaced; never kill the app: remember
                self.error, state = f"{type(e).__name__}: {e}", None  # why, re-read the files next tick

    def stop(self) -> None:
        self.stop_event.set()


def start_live_writer(root: str | os.PathLike | None = None, *, interval_s: float = 2.0) -> threading.Thread:
    """Start (once per process per root) the daemon thread that keeps the LIVE run growing."""
    folder = ensure_demo(root)
    key = _key(folder)
    with _WRITERS_LOCK:
        w = _WRITERS.get(key)
        if w is not None and w.is_alive():
            return w
        w = _LiveWriter(Path(key), float(interval_s))
        _WRITERS[key] = w
        w.start()
        return w


def stop_live_writer(root: str | os.PathLike | None = None, timeout: float = 10.0) -> bool:
    """Stop the live writer of `root` and wait for it; True when one was running."""
    with _WRITERS_LOCK:
        w = _WRITERS.pop(_key(root), None)
    if w is None:
        return False
    w.stop()
    if w is not threading.current_thread():
        w.join(timeout)
    return True
