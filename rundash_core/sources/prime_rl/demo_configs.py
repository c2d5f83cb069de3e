"""The `configs/attempt_N/` folder of an RL attempt: the launch command, the user's TOML and the
resolved per-component JSON configs (trainer, orchestrator, inference, env servers), as prime-rl
writes them at launch."""
from __future__ import annotations

from rundash_core.demo.run_files import RunFiles
from rundash_core.demo.specs import ENVS, RLRunSpec


def _rl_toml(spec: RLRunSpec) -> str:
    envs = "+".join(spec.train_envs)
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
    return "".join(toml)


def write_rl_configs(f: RunFiles, spec: RLRunSpec, attempt: int, t: float, *, resume_step: int | None = None) -> None:
    cmd = f"uv run rl @ {spec.toml_path}"
    if resume_step is not None:
        cmd += f" --run.name {spec.name} --resume"
    base = f"configs/attempt_{attempt}"
    f.text(f"{base}/command.txt", cmd + "\n", t)
    f.text(f"{base}/rl.toml", _rl_toml(spec), t)
    out_dir = f"outputs/{spec.name}"
    monitors = {"file": {"path": "metrics.jsonl", "chunk_bytes": 5368709120, "compress": True, "float_decimals": 4},
                "wandb": None}
    log = {"level": "info", "json_logging": False}
    ckpt = {"interval": spec.ckpt_interval, "resume_step": resume_step}
    orch = {
        "model": {"name": spec.model}, "max_steps": spec.max_steps, "batch_size": spec.batch_size,
        "rollouts_per_example": spec.k, "async_level": 1, "max_off_policy_steps": 2, "seed": 42, "seq_len": 8192,
        "train": {"source": [{"env": {"id": e, "args": {}}, "name": e, "weight": 1.0} for e in spec.train_envs],
                  "sampling": {"temperature": 1.0, "top_p": 1.0, "max_tokens": max(ENVS[e].max_tokens for e in spec.train_envs)}},
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
    for split, env, port in spec.env_ports():
        rel = f"{base}/resolved/envs/{split}/{env}"
        f.json(rel + ".json", {"env": {"id": env, "args": {}}, "serve": {"workers": 4, "max_concurrent": 64},
                               "address_file": f"{out_dir}/{rel}.address", "log": log}, t)
        f.text(rel + ".address", f"tcp://127.0.0.1:{port}", t)
