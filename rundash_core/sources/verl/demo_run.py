"""The plain verl demo run: one console log of a GRPO run (`python -m verl.trainer.main_ppo`) on
GSM8K + MATH, captured with `tee -a` across a crash and a resume (`docs/formats/verl.md`).

The story: launch 1 validates the base model (`step:0`, val-core/val-aux keys only), trains steps
1.. with validation every `test_freq` steps merged into that step's line and checkpoints every
`save_freq` steps, and dies of an NCCL timeout while training the step after `crash_after`. Launch 2
is appended to the same file: it resumes from the checkpoint `resume_from` (so the steps in between
appear twice, with different values) with `trainer.val_before_train=False`, and is stopped (SIGTERM)
after step `last`, short of `total_training_steps`.

F3 value era (numpy >= 2): the keys the format notes list print as `np.float64(…)`/`np.int64(…)`,
the rest as plain Python numbers, float32-reduced ones with their noise. 1-based steps (era S2).
The log's bytes are a deterministic function of the end time.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rundash_core.demo.curves import SEED
from rundash_core.sources.verl.demo_console import (
    f32,
    metric_line,
    npf,
    pprint_lines,
    prefix,
    py,
    ray_banner,
    raylet,
    repeated,
    tqdm_bar,
    validation_pprint,
    worker_stamp,
)
from rundash_core.sources.verl.demo_dumps import dumped_generations

PROJECT = "verl_grpo_gsm8k_math"
MODEL_PATH = "/mnt/shared/hf_cache/hub/models--Qwen--Qwen2.5-3B-Instruct/snapshots/aa8e72537993ba99e69dfaafa59ed015b17504d1"
VAL_SOURCES = (("openai/gsm8k", 1319, 0.61, 0.83), ("HuggingFaceH4/MATH-500", 500, 0.37, 0.53))
TRAIN_PROMPTS = 14966  # after filtering
BATCH = 128
N = 5
GPUS = 8
HEAD_IP = "10.0.2.15"
SALT = 11


@dataclass
class _Step:
    step: int
    attempt: int
    items: list[tuple[str, str]]
    seconds: float
    val: list[tuple[str, str]] = field(default_factory=list)
    val_raw: dict[str, float] = field(default_factory=dict)


def _rng(*salt: int) -> np.random.Generator:
    return np.random.default_rng([SEED, SALT, *salt])


def _progress(step: float) -> float:
    return 1.0 - float(np.exp(-max(step, 0) / 55.0))


def _validation(step: int, attempt: int) -> tuple[list[tuple[str, str]], dict[str, float]]:
    """Per data source, in verl's order: val-aux reward/mean@1 (the reward docks format errors),
    then the core variable acc/mean@1, over the whole test set at `step`."""
    rng = _rng(step, attempt, 3)
    items, raw = [], {}
    for ds, size, a0, a1 in VAL_SOURCES:
        p = a0 + (a1 - a0) * _progress(step)
        acc = rng.binomial(size, min(p, 0.99)) / size
        fmt_fail = rng.binomial(size, 0.05 * (1 - _progress(step)) + 0.005) / size
        for key, value in ((f"val-aux/{ds}/reward/mean@1", acc - 0.5 * fmt_fail), (f"val-core/{ds}/acc/mean@1", acc)):
            items.append((key, npf(value)))
            raw[key] = value
    return items, raw


def _train_step(step: int, attempt: int, total: int, test_freq: int, save_freq: int) -> _Step:
    """One training step's metric dict, in the order verl's trainer fills it."""
    rng = _rng(step, attempt, 1)
    prog = _progress(step)
    n_resp = BATCH * N
    resp_mean = 382 + 150 * prog + rng.normal(0, 9)
    prompt_mean = 137 + rng.normal(0, 3)
    clip = max(0.0, 0.028 - 0.018 * prog + rng.normal(0, 0.004))
    tokens = int(n_resp * (resp_mean + prompt_mean))
    per_rank = tokens / GPUS
    seq_min = int(per_rank * rng.uniform(0.9, 0.97))
    seq_max = int(per_rank * rng.uniform(1.03, 1.1))
    score = float(np.clip(0.47 + 0.36 * prog + rng.normal(0, 0.022), 0, 1))
    score = round(score * n_resp) / n_resp
    entropy = 0.43 - 0.17 * prog + rng.normal(0, 0.012)
    gn = (0.19 + 0.08 * np.exp(-step / 30)) * rng.lognormal(0, 0.15)
    if rng.random() < 0.04:
        gn *= rng.uniform(2.5, 5)
    lr = 1e-6 * min(1.0, step / 10)
    adv_max = float(rng.uniform(1.7, 1.79))
    items: list[tuple[str, str]] = [
        ("global_seqlen/min", str(seq_min)), ("global_seqlen/max", str(seq_max)),
        ("global_seqlen/minmax_diff", str(seq_max - seq_min)),
        ("global_seqlen/balanced_min", str(int(per_rank))), ("global_seqlen/balanced_max", str(int(per_rank) + 1)),
        ("global_seqlen/mean", py(per_rank)),
        ("actor/entropy", f32(entropy)),
        ("actor/pg_loss", npf(rng.normal(-0.002, 0.006))),
        ("actor/pg_clipfrac", npf(abs(rng.normal(0.0035, 0.0012)))),
        ("actor/ppo_kl", npf(rng.normal(0, 6e-5))),
        ("actor/pg_clipfrac_lower", npf(abs(rng.normal(1.5e-5, 1e-5)))),
        ("actor/kl_loss", npf(0.0004 + 0.0031 * prog + abs(rng.normal(0, 0.0002)))),
        ("actor/kl_coef", npf(0.001)),
        ("actor/grad_norm", npf(gn)),
        ("perf/mfu/actor", npf(rng.uniform(0.31, 0.37))),
        ("perf/max_memory_allocated_gb", npf(38.4 + rng.uniform(-0.6, 0.9))),
        ("perf/max_memory_reserved_gb", npf(52.1 + rng.uniform(-0.3, 0.6))),
        ("perf/cpu_memory_used_gb", npf(118.0 + 0.05 * step + rng.uniform(-1, 1))),
        ("actor/lr", npf(lr)),
    ]
    rec = _Step(step, attempt, [], 0.0)
    if step % test_freq == 0 or step == total:
        rec.val, rec.val_raw = _validation(step, attempt)
        items += rec.val
    items += [("training/global_step", str(step)), ("training/epoch", str((step - 1) * BATCH // TRAIN_PROMPTS))]
    items += [("critic/score/mean", f32(score)), ("critic/score/max", "1.0"), ("critic/score/min", "0.0"),
              ("critic/rewards/mean", f32(score)), ("critic/rewards/max", "1.0"), ("critic/rewards/min", "0.0"),
              ("critic/advantages/mean", f32(rng.normal(0, 0.003))), ("critic/advantages/max", f32(adv_max)),
              ("critic/advantages/min", f32(-adv_max)), ("critic/returns/mean", f32(rng.normal(0, 0.003))),
              ("critic/returns/max", f32(adv_max)), ("critic/returns/min", f32(-adv_max)),
              ("response_length/mean", py(resp_mean)), ("response_length/max", "1024.0"),
              ("response_length/min", py(float(rng.integers(28, 70)))), ("response_length/clip_ratio", py(clip)),
              ("response/aborted_ratio", "0.0"),
              ("prompt_length/mean", py(prompt_mean)), ("prompt_length/max", py(float(rng.integers(380, 512)))),
              ("prompt_length/min", py(float(rng.integers(52, 64)))), ("prompt_length/clip_ratio", "0.0")]
    t = {"gen": rng.uniform(55, 70) * (resp_mean / 420), "reward": rng.uniform(0.9, 1.6),
         "old_log_prob": rng.uniform(8, 10.5), "ref": rng.uniform(7.5, 9.5), "adv": rng.uniform(0.04, 0.08),
         "update_actor": rng.uniform(31, 38) * (resp_mean / 420), "update_weights": rng.uniform(2.1, 3.0)}
    if rec.val:
        t["testing"] = rng.uniform(48, 62)
    if step % save_freq == 0:
        t["save_checkpoint"] = rng.uniform(35, 48)
    t["step"] = sum(t.values()) + rng.uniform(0.5, 1.5)
    items += [(f"timing_s/{k}", py(v)) for k, v in t.items()]
    resp_tokens = n_resp * resp_mean
    items += [("timing_per_token_ms/gen", py(t["gen"] * 1000 / resp_tokens)),
              ("timing_per_token_ms/ref", py(t["ref"] * 1000 / tokens)),
              ("timing_per_token_ms/adv", py(t["adv"] * 1000 / tokens)),
              ("timing_per_token_ms/update_actor", py(t["update_actor"] * 1000 / tokens)),
              ("perf/total_num_tokens", str(tokens)), ("perf/time_per_step", py(t["step"])),
              ("perf/throughput", py(tokens / (t["step"] * GPUS)))]
    rec.items, rec.seconds = items, t["step"]
    return rec


def _config(exp: str, total: int, test_freq: int, save_freq: int, *, resume: bool) -> dict:
    return {
        "actor_rollout_ref": {
            "actor": {"clip_ratio": 0.2, "clip_ratio_c": 3.0, "entropy_coeff": 0, "grad_clip": 1.0,
                      "kl_loss_coef": 0.001, "kl_loss_type": "low_var_kl", "loss_agg_mode": "token-mean",
                      "optim": {"lr": 1e-06, "lr_warmup_steps": 10, "lr_warmup_steps_ratio": 0.0,
                                "min_lr_ratio": 0.0, "warmup_style": "constant", "weight_decay": 0.01},
                      "ppo_epochs": 1, "ppo_micro_batch_size_per_gpu": 16, "ppo_mini_batch_size": 64,
                      "strategy": "fsdp", "use_dynamic_bsz": False, "use_kl_loss": True},
            "hybrid_engine": True,
            "model": {"enable_gradient_checkpointing": True, "path": MODEL_PATH, "use_remove_padding": True},
            "ref": {"log_prob_micro_batch_size_per_gpu": 32},
            "rollout": {"gpu_memory_utilization": 0.6, "mode": "sync", "n": N, "name": "vllm",
                        "prompt_length": 512, "response_length": 1024, "temperature": 1.0,
                        "tensor_model_parallel_size": 2, "val_kwargs": {"do_sample": False, "n": 1}}},
        "algorithm": {"adv_estimator": "grpo", "kl_ctrl": {"kl_coef": 0.001, "type": "fixed"},
                      "norm_adv_by_std_in_grpo": True, "use_kl_in_reward": False},
        "data": {"max_prompt_length": 512, "max_response_length": 1024, "prompt_key": "prompt",
                 "train_batch_size": BATCH, "train_files": ["/mnt/shared/data/gsm8k/train.parquet",
                                                            "/mnt/shared/data/math/train.parquet"],
                 "val_batch_size": None, "val_files": ["/mnt/shared/data/gsm8k/test.parquet",
                                                       "/mnt/shared/data/math500/test.parquet"]},
        "reward_model": {"enable": False, "reward_manager": "naive"},
        "trainer": {"critic_warmup": 0, "default_local_dir": f"checkpoints/{PROJECT}/{exp}", "device": "cuda",
                    "experiment_name": exp, "logger": ["console", "wandb"], "n_gpus_per_node": GPUS, "nnodes": 1,
                    "project_name": PROJECT, "resume_from_path": None, "resume_mode": "auto",
                    "rollout_data_dir": None, "save_freq": save_freq, "test_freq": test_freq, "total_epochs": 15,
                    "total_training_steps": total, "val_before_train": not resume,
                    "validation_data_dir": None}}


_SAMPLES = (("Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
             "How many clips did Natalia sell altogether in April and May? Let's think step by step and output "
             "the final answer after \"####\".", "Natalia sold 48 / 2 = 24 clips in May.\nAltogether she sold "
             "48 + 24 = 72 clips.\n#### 72", "72"),
            ("How many vertical asymptotes does the graph of $y=\\frac{2}{x^2+x-6}$ have? Let's think step by step "
             "and output the final answer within \\boxed{}.", "The denominator factors as $(x-2)(x+3)$, which is "
             "zero at $x=2$ and $x=-3$; the numerator is never zero there.\nSo the graph has $\\boxed{2}$ vertical "
             "asymptotes.", "2"))


def _sample_print(pfx: str) -> list[str]:
    """The naive reward manager's `[prompt]/[response]/[ground_truth]/[score]` print, one per source."""
    out = []
    for q, a, gt in _SAMPLES:
        out += [f"{pfx}[prompt] system\n", f"{pfx}You are a helpful assistant.\n", f"{pfx}user\n", f"{pfx}{q}\n",
                f"{pfx}assistant\n", f"{pfx}\n"]
        lines = a.split("\n")
        out += [f"{pfx}[response] {lines[0]}\n"] + [f"{pfx}{x}\n" for x in lines[1:]]
        out += [f"{pfx}[ground_truth] {gt}\n", f"{pfx}[score] 1.0\n"]
    return out


def _launch_lines(exp: str, t: float, cfg: dict, pids: dict, resume_from: int | None, total: int) -> list[str]:
    """From the shell trace to the first training step: Ray, config print, datasets, workers."""
    tr = prefix("TaskRunner", pids["task"])
    w0 = prefix("WorkerDict", pids["w0"])
    w5 = prefix("WorkerDict", pids["w0"] + 7)
    args = (f"algorithm.adv_estimator=grpo data.train_batch_size={BATCH} actor_rollout_ref.rollout.n={N} "
            f"actor_rollout_ref.model.path={MODEL_PATH} trainer.project_name={PROJECT} trainer.experiment_name={exp} "
            f"trainer.total_training_steps={total} trainer.test_freq={cfg['trainer']['test_freq']} "
            f"trainer.save_freq={cfg['trainer']['save_freq']} trainer.n_gpus_per_node={GPUS} 'trainer.logger=[console,wandb]'")
    if resume_from is not None:
        args += " trainer.resume_mode=auto trainer.val_before_train=False"
    out = [f"++ python3 -m verl.trainer.main_ppo {args}\n"]
    out += ray_banner(t, HEAD_IP)
    out += [f"{tr}TaskRunner hostname: gpu-node-07, PID: {pids['task']}\n"]
    out += pprint_lines(tr, cfg)
    out += [f"{tr}Using dataset class: RLHFDataset\n", f"{tr}dataset len: 14973\n", f"{tr}\n",
            "Filtering prompts longer than 512 tokens: 100%|██████████| 14973/14973 [00:04<00:00, 3269.49 examples/s]\n",
            f"{tr}filter dataset len: {TRAIN_PROMPTS}\n", f"{tr}Using dataset class: RLHFDataset\n",
            f"{tr}dataset len: 1819\n", f"{tr}filter dataset len: 1819\n",
            f"{tr}[validate_config] All configuration checks passed successfully!\n",
            f"{tr}Size of train dataloader: {TRAIN_PROMPTS // BATCH}, Size of val dataloader: 1\n",
            f"{tr}Total training steps: {total}\n",
            f"{w0}Model config after override: Qwen2Config {{\n", f'{w0}  "architectures": [\n',
            f'{w0}    "Qwen2ForCausalLM"\n', f"{w0}  ],\n", f'{w0}  "hidden_size": 2048,\n',
            f'{w0}  "num_hidden_layers": 36,\n', f'{w0}  "torch_dtype": "bfloat16",\n', f"{w0}}}\n",
            f"{w0}Qwen2ForCausalLM contains 3.09B parameters\n",
            f"{w0}NCCL version 2.21.5+cuda12.4\n",
            f"{w5}[W{time.strftime('%m%d %H:%M:%S', time.localtime(t + 21))}.120401808 ProcessGroupGloo.cpp:727] Warning: "
            "Unable to resolve hostname to a (local) address. Using the loopback address as fallback. Manually set the "
            f"network interface to bind to with GLOO_SOCKET_IFNAME.{repeated(7)}\n",
            f"{w5}\n", f"Loading checkpoint shards: 100%|██████████| 2/2 [00:03<00:00,  1.62s/it]{repeated(7)}\n",
            f"{w5}{worker_stamp(t + 48)} - INFO - flashinfer.jit: Prebuilt kernels not found, using JIT backend{repeated(7)}\n",
            f"{w0}WARNING {time.strftime('%m-%d %H:%M:%S', time.localtime(t + 52))} [cuda.py:95] To see benefits of async "
            "output processing, enable CUDA graph. Since, enforce-eager is enabled, async output processor cannot be used\n",
            f"{tr}wandb: Tracking run with wandb version 0.19.9\n",
            f"{tr}wandb: 🚀 View run at https://wandb.ai/demo-team/{PROJECT}/runs/{pids['wandb']}\n"]
    ckpt = f"/mnt/shared/verl/checkpoints/{PROJECT}/{exp}"
    if resume_from is None:
        out += [f"{tr}Checkpoint tracker file does not exist: {ckpt}/latest_checkpointed_iteration.txt\n",
                f"{tr}Training from scratch\n"]
    else:
        out += [f"{tr}Load from checkpoint folder: {ckpt}/global_step_{resume_from}\n",
                f"{tr}Setting global step to {resume_from}\n",
                f"{tr}Resuming from {ckpt}/global_step_{resume_from}\n",
                f"{w0}{worker_stamp(t + 80)}:[Rank 0] Loaded model from {ckpt}/global_step_{resume_from}/actor"
                f"{repeated(7)}\n"]
    return out


def write_verl_run(path: Path, exp: str, t_end: float, *, total: int, test_freq: int, save_freq: int,
                   crash_after: int, resume_from: int, last: int) -> Path:
    """Write the log to `path` (its mtime: `t_end`, when the stopped launch printed its last line)."""
    steps1 = [_train_step(s, 1, total, test_freq, save_freq) for s in range(1, crash_after + 1)]
    steps2 = [_train_step(s, 2, total, test_freq, save_freq) for s in range(resume_from + 1, last + 1)]
    startup, gap = 140.0, 600.0
    val0, val0_raw = _validation(0, 1)
    val0_s = 61.3
    crash_s = 1800.0 + 12.0  # the NCCL watchdog's 30 minutes
    span = (startup + val0_s + sum(r.seconds for r in steps1) + crash_s + gap + startup + 95.0
            + sum(r.seconds for r in steps2) + 4.0)
    t = t_end - span
    pids = [{"task": 678203, "w0": 678963, "wandb": "k3v9x2ab"}, {"task": 912455, "w0": 913201, "wandb": "k3v9x2ab"}]
    out: list[str] = []

    def training(records: list[_Step], pid: dict, t: float, initial: int, glue_at: int | None) -> float:
        tr = prefix("TaskRunner", pid["task"])
        w0 = prefix("WorkerDict", pid["w0"])
        elapsed = 0.0
        for i, rec in enumerate(records):
            s = rec.step
            if rec.val:
                out.append(f"{tr}test_gen_batch meta info: {{'eos_token_id': 151645, 'pad_token_id': 151643, "
                           f"'recompute_log_prob': False, 'do_sample': False, 'validate': True, 'global_steps': {s}}}\n")
                out.append(f"{tr}validation generation end\n")
                out.extend(_sample_print(tr))
                out.append(dumped_generations(tr, path.parent, s, t))
            if s % save_freq == 0:
                folder = f"checkpoints/{PROJECT}/{exp}/global_step_{s}"
                out.append(f"{tr}local_global_step_folder: {folder}\n")
                out.append(f"{w0}INFO:{worker_stamp(t + rec.seconds - 20)}:[Rank 0] Saved model to "
                           f"/mnt/shared/verl/{folder}/actor/model_world_size_{GPUS}_rank_0.pt{repeated(7)}\n")
            t += rec.seconds
            elapsed += rec.seconds
            line = tr + metric_line(s, rec.items) + "\n"
            bar = tqdm_bar("Training Progress", s, total, elapsed, initial=initial)
            if i == glue_at:  # a redraw written without its newline: the next print lands on the same line
                out.append(f"{tr}\n")
                out.append(bar + metric_line(s, rec.items) + "\n")
            else:
                out.append(line)
                out.append(f"{tr}\n")
                out.append(bar + "\n")
        return t

    # launch 1
    cfg1 = _config(exp, total, test_freq, save_freq, resume=False)
    out += _launch_lines(exp, t, cfg1, pids[0], None, total)
    tr1 = prefix("TaskRunner", pids[0]["task"])
    t += startup
    out.append(f"{tr1}test_gen_batch meta info: {{'eos_token_id': 151645, 'pad_token_id': 151643, "
               "'recompute_log_prob': False, 'do_sample': False, 'validate': True, 'global_steps': 0}\n")
    out.append(f"{tr1}validation generation end\n")
    out.extend(_sample_print(tr1))
    out.append(dumped_generations(tr1, path.parent, 0, t))
    t += val0_s
    out += validation_pprint(tr1, "Initial", [(k, v) for k, v in val0])
    out.append(tr1 + metric_line(0, val0) + "\n")
    out.append(f"{tr1}\n")
    out.append(tqdm_bar("Training Progress", 0, total, 0) + "\n")
    t = training(steps1, pids[0], t, 0, 37)
    # the crash while training the next step
    w3 = prefix("WorkerDict", pids[0]["w0"] + 3)
    out += [f"{w3}[rank3]:[E{time.strftime('%m%d %H:%M:%S', time.localtime(t + 1800))}.552089 "
            f"{pids[0]['w0'] + 3} ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation timeout: "
            f"WorkNCCL(SeqNum={88113 + crash_after * 11}, OpType=_ALLGATHER_BASE, NumelIn=1196032, NumelOut=9568256, "
            "Timeout(ms)=1800000) ran for 1800088 milliseconds before timing out.\n",
            f"{w3}[rank3]:[E{time.strftime('%m%d %H:%M:%S', time.localtime(t + 1800))}.553172 {pids[0]['w0'] + 3} "
            "ProcessGroupNCCL.cpp:1785] [PG ID 1 PG GUID 1 Rank 3] Exception (either an error or timeout) detected by "
            "watchdog at work: 88148, last enqueued NCCL work: 88148, last completed NCCL work: 88147.\n",
            raylet("A worker died or was killed while executing a task by an unexpected system error. To troubleshoot the "
                   "problem, check the logs for the dead worker. RayTask ID: ffffffffffffffff6a1c9e0d2b8f4c1a8e7d01000000 "
                   f"Worker ID: 5d2e8c1f4b7a9e3d6c0f2a8b Node ID: 9e4f1a7c3b5d8e2f Worker IP address: {HEAD_IP} "
                   f"Worker port: 10123 Worker PID: {pids[0]['w0'] + 3}"),
            f"Error executing job with overrides: ['algorithm.adv_estimator=grpo', 'data.train_batch_size={BATCH}', "
            f"'actor_rollout_ref.rollout.n={N}', 'trainer.experiment_name={exp}', 'trainer.total_training_steps={total}']\n",
            "Traceback (most recent call last):\n",
            '  File "/workspace/verl/verl/trainer/main_ppo.py", line 42, in main\n', "    run_ppo(config)\n",
            '  File "/workspace/verl/verl/trainer/main_ppo.py", line 85, in run_ppo\n',
            "    ray.get(runner.run.remote(config))\n",
            "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n",
            f"\tclass_name: create_colocated_worker_cls.<locals>.WorkerDict\n\tactor_id: 6a1c9e0d2b8f4c1a8e7d0100\n"
            f"\tpid: {pids[0]['w0'] + 3}\n\tname: GzHhhdWorkerDict_0:3\n"
            "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit detail: "
            "Worker unexpectedly exits with a connection error code 2. End of file.\n",
            "\n", "Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.\n"]
    t += crash_s + gap
    # launch 2, appended by `tee -a`
    cfg2 = _config(exp, total, test_freq, save_freq, resume=True)
    out += _launch_lines(exp, t, cfg2, pids[1], resume_from, total)
    t += startup + 95.0
    out.append(f"{prefix('TaskRunner', pids[1]['task'])}\n")
    out.append(tqdm_bar("Training Progress", resume_from, total, 0.0, initial=resume_from) + "\n")
    t = training(steps2, pids[1], t, resume_from, None)
    tr2 = prefix("TaskRunner", pids[1]["task"])
    out += [f"{tr2}*** SIGTERM received at time={int(t + 3)} on cpu 17 ***\n",
            f"{tr2}PC: @     0x7f3a1c2d4e5f  (unknown)  pthread_cond_wait@@GLIBC_2.3.2\n",
            raylet("Received SIGTERM, shutting down workers."),
            f"*** SIGTERM received at time={int(t + 4)} on cpu 3 ***\n"]
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as fh:
        fh.write("".join(out))
    os.utime(path, (t_end, t_end))
    return path
