"""Rows of `monitors/file/metrics.jsonl` with the spec's key grammar (4.5): the orchestrator's
per-step row (episode stats per scope, progress, timings), the trainer's five per-step rows, eval
rows, and the time-keyed inference and dispatcher gauges (`step` null). Values come from `Curves`."""
from __future__ import annotations

import json
import zlib

import numpy as np

from rundash_core.demo.curves import Curves
from rundash_core.demo.specs import ENVS

INF_EVERY_S = 5.0  # cadence of the time-keyed inference rows
DISPATCH_EVERY_S = 10.0  # and of the dispatcher rows


def metrics_line(step: int | None, t: float, values: dict, producer: str) -> str:
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


def _scope_keys(row: dict, scope: str, sm: dict, default_reward: str, *, eval_mode: bool = False,
                full: bool = True) -> None:
    """Episode statistics of one scope (spec 4.5), a reduced but representative stat set;
    `full=False` (per-env scopes next to `train/agg`) leaves out timings and solve rates."""
    e = ENVS[sm["env"]] if sm["env"] else None
    rname = e.reward if e else default_reward
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


def orch_row(curves: Curves, step: int, attempt: int, cum: dict) -> tuple[dict, dict]:
    """The orchestrator's big per-step row and the numbers its log line prints; adds the step's
    tokens, rollouts and tasks to the running totals in `cum`."""
    s = curves.spec
    rng = curves.rng(step, attempt, 1)
    batches = [curves.sample_batch(rng, env, step, s.groups, s.k) for env in s.train_envs]
    row: dict[str, float] = {}
    pooled = curves.pool(batches) if len(batches) > 1 else batches[0]
    default_reward = ENVS[s.train_envs[0]].reward
    if len(batches) > 1:  # single-env runs are shown as their env's section (spec 8.3)
        _scope_keys(row, "train/agg", pooled, default_reward)
    for sm in batches:
        _scope_keys(row, f"train/{sm['env']}", sm, default_reward, full=len(batches) == 1)
    tokens = float(pooled["total"].sum())
    inp = float(pooled["inp"].sum())
    out = float(pooled["out"].sum())
    n = float(pooled["reward"].size)
    cum["tokens"] = cum.get("tokens", 0.0) + tokens
    cum["rollouts"] = cum.get("rollouts", 0.0) + n
    cum["tasks"] = cum.get("tasks", 0.0) + n / s.k
    duration = curves.orch_duration(step, attempt)
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
    log_numbers = {"reward": float(pooled["reward"].mean()), "tokens": tokens, "n": n, "time": duration,
                   "seq": tokens / n}
    return row, log_numbers


def trainer_rows(curves: Curves, step: int, attempt: int, orch_numbers: dict,
                 wait: float | None = None) -> tuple[list[dict], dict]:
    """The RL trainer's 5 rows for one step (perf, optim, tensor stats, time, system) and the numbers
    its log line prints, from the orchestrator's (`orch_row`). `wait` is how long the trainer waited for the batch (random when not given)."""
    s = curves.spec
    rng = curves.rng(step, attempt, 2)
    prog = curves.progress(step)
    fb = orch_numbers["time"] * rng.uniform(0.5, 0.6)
    load, bcast = rng.uniform(0.1, 0.4), rng.uniform(0.8, 2.0)
    wait = rng.exponential(0.8) if wait is None else float(wait)
    ckpt = rng.uniform(8, 14) if step % s.ckpt_interval == 0 else 0.0
    t_step = fb + load + bcast + wait
    thr = orch_numbers["tokens"] / t_step
    perf = {"perf/throughput": thr, "perf/throughput_per_gpu": thr / s.gpus_train,
            "perf/mfu": 6 * s.params_b * 1e9 * thr / (s.gpus_train * 989e12) * 100,
            "perf/peak_memory": s.mem_gib * rng.uniform(0.93, 1.05)}
    gn = (0.16 + 0.12 * np.exp(-step / 40)) * rng.lognormal(0, 0.18)
    if rng.random() < 0.035:
        gn *= rng.uniform(3, 8)
    optim = {"optim/lr": curves.lr(step), "optim/grad_norm": gn}
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


def eval_row(curves: Curves, env: str, step: int, attempt: int) -> tuple[dict, dict]:
    """One eval epoch of `env` at `step` and its avg@k / pass@k for the log line."""
    s = curves.spec
    rng = curves.rng(step, attempt, 3, zlib.crc32(env.encode()))
    sm = curves.sample_batch(rng, env, step, s.eval_examples, s.eval_k)
    row: dict[str, float] = {}
    _scope_keys(row, f"eval/{env}", sm, ENVS[s.train_envs[0]].reward, eval_mode=True)
    k = s.eval_k
    correct = sm["reward"].reshape(-1, k)
    binary = ENVS[env].binary
    c = (correct >= 0.5) if binary else (correct >= 0.999)
    row[f"eval/{env}/all/agent/avg@{k}"] = sm["reward"].mean()
    row[f"eval/{env}/effective/agent/pass@1"] = c.mean()
    row[f"eval/{env}/effective/agent/pass@{k}"] = c.any(axis=1).mean()
    row[f"eval/{env}/effective/agent/pass^{k}"] = c.all(axis=1).mean()
    row[f"eval/{env}/policy_version"] = float(step)
    return row, {"avg": row[f"eval/{env}/all/agent/avg@{k}"], "pass": row[f"eval/{env}/effective/agent/pass@{k}"]}


def inference_rows(curves: Curves, times: np.ndarray, salt: int) -> list[tuple[float, dict]]:
    """vLLM gauges aggregated over the inference servers, one row per time in `times`."""
    s = curves.spec
    n = len(times)
    if n == 0:
        return []
    rng = curves.rng(salt, 4)
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


def dispatcher_rows(curves: Curves, times: np.ndarray, salt: int, policy_at, eval_at) -> list[tuple[float, dict]]:
    """The orchestrator's dispatcher gauges, one row per time in `times`; `policy_at(t)` is the
    policy version then, `eval_at(t)` whether an eval epoch was running."""
    s = curves.spec
    n = len(times)
    if n == 0:
        return []
    rng = curves.rng(salt, 5)
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
