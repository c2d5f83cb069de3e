"""The SWE-Lego-RL demo's console log (a fully-async verl trainer printing Harbor trial folders,
validation dumps and metric lines) and its vLLM server sidecar log (see `lego_run` for the story).
"""
from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np

from rundash_core.sources.swe_lego_rl.demo_trials import (
    HEAD_IP,
    PROJECT,
    PROMPTS,
    TOTAL,
    TRAIN_TASKS,
    VAL_AFTER,
    VAL_TASKS,
    WORKER_IP,
    N,
    Trial,
    demo_rng,
    train_folders,
    train_p,
    val_folder,
)
from rundash_core.sources.verl.demo_console import (
    f32,
    metric_line,
    npf,
    npi,
    pprint_lines,
    prefix,
    py,
    repeated,
    tqdm_bar,
    validation_pprint,
)


def _step_metrics(step: int, t_step: float, trials: list[Trial] | None) -> list[tuple[str, str]]:
    """The fully-async trainer's metric line of one step (values as the Lego sample prints them)."""
    rng = demo_rng(step, 1)
    if trials:
        scored = [t.reward for t in trials if t.reward is not None]
        score = float(np.mean(scored)) if scored else 0.0
        turns = [t.turns for t in trials if t.reward is not None] or [0]
        failed = sum(t.reward is None for t in trials)
    else:
        score = float(np.mean([train_p(x[1], step) for x in TRAIN_TASKS]) + rng.normal(0, 0.04))
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


def write_log(path: Path, exp: str, t0: float, step_end: dict, val_end: dict, step_s: list, val_s: list,
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
        lines.append(tr + metric_line(after, [("timing_s/merge_val", py(demo_rng(after, 5).uniform(0.6, 1.9)))]) + "\n")
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
        srng = demo_rng(s, 6)
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


def write_vllm_log(path: Path, t0: float, t_end: float) -> None:
    rng = demo_rng(7)
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
