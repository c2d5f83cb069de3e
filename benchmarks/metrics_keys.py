"""The key grammar of prime-rl's metrics (spec 4.5) and what each key's values look like.

Used by `metrics_data` to write a synthetic metrics.jsonl: the producers' key lists (trainer,
orchestrator, eval, inference scraper, periodic logger) for a chosen number of keys, which train
env a per-env key belongs to, and each key's value range and text format.
"""
from __future__ import annotations

from collections.abc import Iterable

ENVS = [
    "reverse-text", "gsm8k", "math-python", "hendrycks-math", "wordle", "sudoku", "alphabet-sort",
    "wiki-search", "code-contests", "livecodebench", "aime2024", "aime2025", "mmlu-pro", "gpqa",
    "ifeval", "tau-bench", "swe-gym", "terminal-bench", "countdown", "arc-agi", "logic-puzzles",
    "pydantic-adherence", "unscramble", "acereason-math",
]
ENV_INDEX = {e: i for i, e in enumerate(ENVS)}
EVAL_ENVS = ["aime2025", "gpqa"]
STATS5 = ("mean", "max", "min", "p10", "p90")
TENSOR5 = ("mean", "median", "std", "min", "max")
EPISODE_QTY = ("num_total_tokens", "num_input_tokens", "num_output_tokens", "num_turns", "num_branches")
TIMING = ("setup", "agent", "finalize", "scoring", "agent/model", "agent/harness", "total")


def _env(i: int) -> str:
    return ENVS[i] if i < len(ENVS) else f"env-{i}"


def trainer_key_groups(n: int) -> list[list[str]]:
    """The RL trainer's 5 rows per step (perf, optim, tensor stats, time, system), n keys in all."""
    perf = [f"perf/{k}" for k in ("throughput", "throughput_per_gpu", "mfu", "peak_memory")]
    optim = ["optim/lr", "optim/grad_norm"]
    times = [f"time/{k}" for k in ("step", "wait_for_batch", "load_data", "broadcast_weights", "save_ckpt",
                                    "forward_backward")]
    system = [f"system/ckpt_disk_{k}" for k in ("free_gib", "used_gib", "total_gib", "free_ratio")]

    def tensor_keys() -> Iterable[str]:
        yield from (f"loss/{s}" for s in TENSOR5)
        yield from (f"entropy/all/{s}" for s in ("mean", "std", "max"))
        yield from (f"mismatch_kl/all/{s}" for s in ("mean", "max"))
        yield "kl_ent_ratio/mean"
        for base in ("is_masked/all", "masked_mismatch_kl/all", "unmasked_mismatch_kl/all"):
            yield from (f"{base}/{s}" for s in ("mean", "max"))
        yield from (f"max_vio/{s}" for s in TENSOR5)
        yield from (f"routing_confidence/{s}" for s in TENSOR5)
        for i in range(10**6):
            env = _env(i)
            yield from (f"entropy/{env}/{s}" for s in ("mean", "std", "max"))
            for base in ("mismatch_kl", "masked_mismatch_kl", "unmasked_mismatch_kl", "is_masked"):
                yield from (f"{base}/{env}/{s}" for s in ("mean", "max"))

    want = max(n - len(perf) - len(optim) - len(times) - len(system), 5)
    tensor = [k for _, k in zip(range(want), tensor_keys())]
    return [perf, optim, tensor, times, system]


def _train_scope_keys(scope: str) -> list[str]:
    """Episode statistics of one train scope (`train/agg` or `train/<env>`): 89 keys."""
    subsets = ("all", "effective")
    keys = [f"{scope}/{sub}/agent/reward/{s}" for sub in subsets for s in STATS5]
    keys += [f"{scope}/all/has_error/mean", f"{scope}/all/cancelled/mean"]
    keys += [f"{scope}/{sub}/{q}/{s}" for sub in subsets for q in EPISODE_QTY for s in STATS5]
    for sub in subsets:
        agent = f"{scope}/{sub}/agent"
        keys += [f"{agent}/is_truncated/mean", f"{agent}/is_completed/mean"]
        keys += [f"{agent}/timing/{t}/mean" for t in TIMING]
        keys += [f"{agent}/stop_condition/generation_truncated", f"{agent}/metrics/correct_answer/mean"]
    keys += [f"{scope}/all/agent/solved_{w}" for w in ("none", "all", "some")]
    return keys + [f"{scope}/effective/agent/is_trainable/mean", f"{scope}/effective/agent/is_admitted/mean"]


def orch_train_keys(n: int) -> list[str]:
    """The orchestrator's one big row per step: progress, time, off_policy, batch, episode stats."""
    keys = [f"progress/{k}" for k in ("tokens", "input_tokens", "output_tokens", "rollouts", "tasks",
                                      "total_tokens", "total_rollouts", "total_tasks")]
    keys += [f"time/{k}" for k in ("step", "pack", "save_ckpt", "wait_for_policy")]
    keys += ["off_policy/mean", "off_policy/max", "off_policy/dropped"]
    keys += [f"off_policy/{a}/{s}" for a in ("in_flight", "in_queue") for s in ("mean", "max")]

    def scoped() -> Iterable[str]:
        yield from _train_scope_keys("train/agg")
        for i in range(10**6):
            yield f"batch/{_env(i)}"
            yield from _train_scope_keys(f"train/{_env(i)}")

    return keys + [k for _, k in zip(range(n - len(keys)), scoped())]


ORCH_ERROR_KEYS = [f"train/agg/all/agent/error/{e}" for e in ("TimeoutError", "ContextLengthExceeded", "SandboxError")]


def orch_eval_keys() -> list[str]:
    """One eval row: pass@k and episode statistics of each eval env."""
    return [f"eval/{env}/{k}" for env in EVAL_ENVS for k in (
        "all/agent/avg@4", "effective/agent/pass@1", "effective/agent/pass@4", "effective/agent/pass^4",
        "all/cancelled/mean", "all/has_error/mean", "policy_version",
        *(f"all/{q}/{s}" for q in ("num_total_tokens", "num_turns") for s in STATS5))]


def inference_keys(engines: int) -> list[str]:
    """The vLLM /metrics scraper's time-keyed row: per engine, pooled, histogram percentiles."""
    gauges = ("num_requests_running", "num_requests_waiting", "kv_cache_usage_perc")
    keys = [f"inference/server{e}.0/{k}" for e in range(engines) for k in gauges]
    keys += [f"inference/agg/{k}/{s}" for k in gauges for s in ("min", "max", "sum", "mean", "median")]
    keys += ["inference/agg/generation_tokens_total:rate/sum", "inference/agg/prompt_tokens_total:rate/sum",
             "inference/agg/prefix_cache_hit_rate/pooled"]
    return keys + [f"inference/{phase}/{k}/{p}" for phase, k in (
        ("agg", "time_to_first_token_seconds"), ("decode", "inter_token_latency_seconds"),
        ("prefill", "request_prefill_time_seconds")) for p in ("p50", "p90", "p99")]


PERIODIC_KEYS = [*(f"dispatcher/{k}" for k in ("inflight/train", "inflight/eval", "queued/eval", "errored/train",
                                               "errored/eval", "mode", "off_policy/mean", "off_policy/max",
                                               "cancelled/train")),
                 "concurrency/max_inflight", "watcher/policy_version", "event_loop_lag/mean", "event_loop_lag/max",
                 "event_loop_lag/p99"]


def env_of(key: str) -> int:
    """Index of the train env a per-env key belongs to, or -1 (always written)."""
    parts = key.split("/")
    if parts[0] == "eval" or len(parts) < 2:
        return -1
    return ENV_INDEX.get(parts[1], int(parts[1][4:]) if parts[1][:4] == "env-" else -1)


# Values -----------------------------------------------------------------------------------------

_COUNTS = ("/error/", "dispatcher/inflight", "dispatcher/queued", "dispatcher/errored", "dispatcher/cancelled",
           "dispatcher/mode", "concurrency/", "watcher/", "policy_version", "num_requests_")
_FULL = ("loss/", "entropy/", "mismatch_kl/", "masked_mismatch_kl/", "unmasked_mismatch_kl/", "is_masked/",
         "kl_ent_ratio/", "max_vio/", "routing_confidence/", "optim/", "perf/mfu")


def value_model(key: str) -> tuple[float, float, str]:
    """(low, high, format) of a key's values. Formats: int (counters), intfloat (min/max of counts,
    "512.0"), zero (mostly 0), full (float32 repr, the trainer's tensor stats), short (round 6)."""
    leaf = key.rsplit("/", 1)[-1]
    if key.startswith("progress/"):
        return 1e4, 1e9, "int"
    if any(c in key for c in _COUNTS):
        return 0, 256, "int"
    if key.endswith("time/save_ckpt"):
        return 0, 400, "zero"
    if any(q in key for q in EPISODE_QTY):
        scale = 8 if ("turns" in key or "branches" in key) else 4096
        return 1, scale, ("intfloat" if leaf in ("max", "min", "p10", "p90") else "short")
    if key == "optim/lr":
        return 1e-7, 3e-6, "full"
    if key.startswith("loss/"):
        return -0.2, 0.2, "full"
    if key.startswith(_FULL):
        return 0, 1, ("short" if env_of(key) >= 0 else "full")
    if key.startswith("perf/throughput"):
        return 1e3, 3e4, "short"
    if key.startswith("time/") or "/timing/" in key:
        return 0.01, 60, "short"
    if key.startswith("system/"):
        return 1, 2048, "short"
    return 0, 1, "short"
