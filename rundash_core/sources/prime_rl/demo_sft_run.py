"""Writing the SFT run: prime-rl's `sft` trainer on a reverse-text dataset (one attempt, trainer
rows and validation rows only, no orchestrator, inference or traces)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from rundash_core.demo.curves import SEED
from rundash_core.demo.logs import loguru
from rundash_core.demo.run_files import RunFiles
from rundash_core.sources.prime_rl.demo_metric_rows import metrics_line


def write_sft_run(out_dir: Path, name: str, steps: int, t_end: float) -> Path:
    rng = np.random.default_rng([SEED, 4])
    model = "Qwen/Qwen3-0.6B"
    data_name = "willcb/R1-reverse-wikipedia-paragraphs-v1-1000"
    warmup, lr, val_every, ckpt_every = 15, 2e-5, 25, 100
    step_t = 3.2 * rng.lognormal(0, 0.08, steps + 1)
    t0 = t_end - float(step_t.sum()) - 60.0
    run = out_dir / name
    f = RunFiles(run)
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
        "ckpt": {"interval": ckpt_every, "keep_last": 1}, "max_steps": steps, "output_dir": f"outputs/{name}",
        "monitors": {"file": {"path": "metrics.jsonl"}, "wandb": None}, "log": {"level": "info", "json_logging": False},
    }, t0)
    f.link("configs/latest", "attempt_1", t0)
    lines: list[str] = []
    log = [loguru(t0, "INFO", "Starting SFT trainer"),
           loguru(t0 + 0.5, "INFO", f"Initializing model {model} (FSDP dp_shard=1)"),
           loguru(t0 + 12, "INFO", f"Loaded dataset {data_name} (1000 examples, 31.2M tokens)")]
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
            lines.append(metrics_line(step, t + i * 0.001, r, "trainer"))
        log.append(loguru(t, "SUCCESS", f"Step {step} | Time: {dt:.2f}s | Loss: {loss:.4f} | Grad. Norm: {gn:.4f} | "
                                        f"LR: {cur_lr:.2e} | Throughput: {thr:.0f} tokens/s | Peak Mem.: {rows[0]['perf/peak_memory']:.1f} GiB"))
        if step % val_every == 0:
            vl = 0.62 + 1.2 * np.exp(-step / 40) + 0.0004 * max(step - 150, 0) + rng.normal(0, 0.01)
            t += 4.0
            lines.append(metrics_line(step, t, {"val/loss": vl, "val/perplexity": float(np.exp(vl))}, "trainer"))
            log.append(loguru(t, "INFO", f"Validation at step {step} | Loss: {vl:.4f} | Perplexity: {np.exp(vl):.3f}"))
        if ckpt:
            log.append(loguru(t + ckpt, "INFO", f"Saved checkpoint to checkpoints/step_{step} in {ckpt:.2f}s"))
    log.append(loguru(t + 1, "SUCCESS", f"Finished training after {steps} steps"))
    t_last = max(t + 1, t_end)
    f.text("logs/attempt_1/trainer.log", log, t_last)
    f.link("logs/latest", "attempt_1", t0)
    f.text("monitors/file/metrics.jsonl", lines, t_last)
    f.text("trainer_step", str(steps), t_last)
    f.finish()
    return run
