"""Writing one RL run: simulate its attempts back to back on a relative clock (metric rows, log
lines, which steps get trace samples), then shift them so the last event lands at the requested
time and write the run directory in prime-rl's layout with matching mtimes."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rundash_core.demo import logs
from rundash_core.demo.curves import Curves, random_uuid
from rundash_core.demo.run_files import RunFiles
from rundash_core.demo.specs import RLRunSpec
from rundash_core.sources.prime_rl.demo_configs import write_rl_configs
from rundash_core.sources.prime_rl.demo_metric_rows import (
    DISPATCH_EVERY_S,
    INF_EVERY_S,
    dispatcher_rows,
    eval_row,
    inference_rows,
    metrics_line,
    orch_row,
    trainer_rows,
)
from rundash_core.sources.prime_rl.demo_traces import TraceStream, episodes_for_step

RELAUNCH_GAP_S = 480.0  # between a crashed attempt's last line and the next attempt's launch


@dataclass
class Attempt:
    number: int
    first_step: int
    last_step: int  # last step with trainer + orch rows
    resume_from: int | None = None
    crash: bool = False
    finished: bool = False
    t_start: float = 0.0
    t_end: float = 0.0


@dataclass
class _Events:
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


def _log_startup(curves: Curves, out: _Events, att: Attempt, tr_log: str, or_log: str, inf_log: str) -> float:
    """The launch lines of every process of an attempt; returns when the inference pool is ready."""
    s = curves.spec
    t = att.t_start
    rng = curves.rng(att.number, 99)
    out.log(tr_log, t, "loguru", "INFO", "Starting RL trainer")
    out.log(tr_log, t + 0.4, "loguru", "INFO", f"Initializing model {s.model} (FSDP dp_shard={s.gpus_train}, cp=1)")
    t_loaded = t + rng.uniform(15, 25)
    out.log(tr_log, t_loaded, "loguru", "INFO", f"Loaded model in {t_loaded - t - 0.4:.2f}s")
    if att.resume_from is not None:
        out.log(tr_log, t_loaded + 1, "loguru", "INFO", f"Loading checkpoint from checkpoints/step_{att.resume_from}/trainer")
        out.log(tr_log, t_loaded + 9, "loguru", "INFO", f"Resumed from step {att.resume_from} in 8.37s")
        out.log(or_log, t + 2, "loguru", "INFO", f"Resuming from checkpoint step {att.resume_from} "
                                                 f"(checkpoints/step_{att.resume_from}/orchestrator)")
    msgs = ["Starting orchestrator", f"Logging metrics and episodes to the local filesystem (outputs/{s.name})",
            f"Loading tokenizer for {s.model}"]
    msgs += [f"Env server {env} ({split}) is up at tcp://127.0.0.1:{port}" for split, env, port in s.env_ports()]
    msgs += ["Waiting for inference pool to be ready"]
    for i, msg in enumerate(msgs):
        out.log(or_log, t + 0.3 * i, "loguru", "INFO", msg)
    t_ready = t + rng.uniform(50, 80)
    out.log(or_log, t_ready, "loguru", "INFO", f"Inference pool is ready ({s.gpus_infer} servers)")
    out.log(or_log, t_ready + 2, "loguru", "INFO", f"Starting orchestrator loop (max_steps={s.max_steps}, async_level=1)")
    for i, msg in enumerate(["Automatically detected platform cuda.", "vLLM API server version 0.10.2",
                             f"non-default args: {{'model': '{s.model}', 'enable_auto_tool_choice': True, "
                             "'tool_call_parser': 'hermes', 'reasoning_parser': 'qwen3', 'max_model_len': 8192, "
                             f"'enable_prefix_caching': True, 'data_parallel_size': {s.gpus_infer}}}",
                             "Resolved architecture: Qwen3ForCausalLM",
                             f"Model loading took {2 * s.params_b + 0.4:.4f} GiB and 4.201 seconds",
                             "Starting vLLM API server 0 on http://0.0.0.0:8000"]):
        out.log(inf_log, t + 0.5 + i * 6, "vllm", msg, 3134, "api_server.py:1805")
    for split, env, port in s.env_ports():
        rel = f"logs/attempt_{att.number}/envs/{split}/{env}.log"
        out.log(rel, t + 0.2, "plain", f"verifiers.v1.serve.server: EnvServer {env} listening on tcp://127.0.0.1:{port} (workers=4)")
        out.log(rel, t + 1.2, "plain", f"verifiers.v1.serve.pool: spawned 4 workers for {env}")
    return t_ready


def _simulate_attempt(curves: Curves, out: _Events, att: Attempt, cum: dict, trace_steps: set[int]) -> None:
    """Rows, log lines and trace requests of one attempt, starting at `att.t_start`; sets `att.t_end`."""
    s = curves.spec
    a = att.number
    L = f"logs/attempt_{a}"
    TR, OR, INF = f"{L}/trainer.log", f"{L}/orchestrator.log", f"{L}/inference.log"
    t = att.t_start
    t_ready = _log_startup(curves, out, att, TR, OR, INF)

    eval_windows: list[tuple[float, float]] = []
    policy_times: list[tuple[float, int]] = [(t_ready, att.first_step - 1)]

    def do_eval(step: int, t_at: float) -> float:
        t_end = t_at
        for env in s.eval_envs:
            out.log(OR, t_at, "loguru", "INFO", f"Running eval for {env} at step {step} "
                                                f"({s.eval_examples} examples x {s.eval_k} rollouts)")
            row, sm = eval_row(curves, env, step, a)
            dur = float(curves.rng(step, a, 8).uniform(20, 45))
            t_end = t_at + dur
            out.row(t_end, step, row)
            out.log(OR, t_end, "loguru", "SUCCESS", logs.eval_done_msg(env, step, s.eval_k, sm, dur))
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
        orch, sm = orch_row(curves, step, a, cum)
        # async_level=1: rollouts for `step` need the policy of step-2 to be out of the trainer
        t_o = max(t_o, t_tr_hist.get(step - 2, t_o)) + sm["time"]
        out.row(t_o, step, orch)
        out.log(OR, t_o, "loguru", "SUCCESS", logs.orch_step_msg(step, sm))
        wait = max(t_o - t_tr, 0.0)
        rows, lg = trainer_rows(curves, step, a, sm, wait=wait)
        t_tr = max(t_tr, t_o) + lg["busy"]
        t_tr_hist[step] = t_tr
        out.log(TR, t_o + 0.05, "loguru", "INFO", logs.batch_received_msg(step, int(sm["n"])))
        for i, r in enumerate(rows):
            out.row(t_tr + i * 0.001, step, r, "trainer")
        out.log(TR, t_tr, "loguru", "SUCCESS", logs.trainer_step_msg(step, lg))
        out.log(INF, t_tr - lg["ckpt"] - 0.5, "access", "/update_weights")
        if lg["ckpt"]:
            out.log(TR, t_tr - lg["ckpt"], "loguru", "INFO", f"Saving checkpoint at step {step}")
            out.log(TR, t_tr, "loguru", "INFO", f"Saved checkpoint to checkpoints/step_{step} in {lg['ckpt']:.2f}s")
            out.log(OR, t_o + 0.1, "loguru", "INFO", f"Saving orchestrator checkpoint to checkpoints/step_{step}/orchestrator")
        if lg["gn"] > 0.7:
            out.log(TR, t_tr + 0.01, "loguru", "WARNING", f"Gradient norm {lg['gn']:.3f} at step {step} is well above "
                                                          f"its running average (x{lg['gn'] / 0.2:.1f})")
        rr = curves.rng(step, a, 9)
        if rr.random() < 0.02:
            out.log(OR, t_o - 3, "loguru", "WARNING", f"[verifiers] model call failed: id={random_uuid(rr)} ProviderError: "
                    "Error code: 503 - {'object': 'error', 'message': 'Service Unavailable: engine is sleeping for weight update'}")
        if step in trace_steps:
            out.traces.append((step, a, t_o, 4, "train"))
        policy_times.append((t_tr, step))
        out.last_trainer_step = step
        if step % s.eval_interval == 0 and s.eval_envs:
            t_o = do_eval(step, t_o + 0.5)
    t_end = max(t_o, t_tr)
    for tt in np.arange(t + 40, t_end, 30.0):  # vLLM engine stats
        r = curves.rng(a, int(tt - t), 10)
        out.log(INF, float(tt), "vllm", f"Engine 000: Avg prompt throughput: {r.uniform(2000, 6000):.1f} tokens/s, "
                f"Avg generation throughput: {r.uniform(400, 1400):.1f} tokens/s, Running: {int(r.integers(3, 16))} reqs, "
                f"Waiting: 0 reqs, GPU KV cache usage: {r.uniform(5, 60):.1f}%, Prefix cache hit rate: {r.uniform(55, 85):.1f}%")
    for tt, r in inference_rows(curves, np.arange(t_ready + 1.0, t_end, INF_EVERY_S), a * 1000 + 1):
        out.row(tt, None, r)
    pt = np.array([p[0] for p in policy_times])
    pv = [p[1] for p in policy_times]
    for tt, r in dispatcher_rows(curves, np.arange(t_ready + 1.4, t_end, DISPATCH_EVERY_S), a * 1000 + 2,
                                 lambda x: pv[max(int(np.searchsorted(pt, x, side="right")) - 1, 0)],
                                 lambda x: any(lo <= x <= hi for lo, hi in eval_windows)):
        out.row(tt, None, r)
    if att.crash:
        tc = t_end + 9
        out.log(TR, tc - 8, "loguru", "INFO", logs.batch_received_msg(att.last_step + 1, s.batch_size))
        out.log(TR, tc, "loguru", "ERROR", logs.OOM_TRACEBACK)
        out.log(OR, tc + 30, "loguru", "WARNING", f"Waiting for policy step {att.last_step} (no new checkpoint for 30.0s)")
        out.log(OR, tc + 31, "loguru", "ERROR", "Trainer process exited with code 1; shutting down")
        t_end = tc + 31
    if att.finished:
        out.log(TR, t_end + 1, "loguru", "SUCCESS", f"Finished training after {att.last_step} steps")
        out.log(OR, t_end + 1, "loguru", "SUCCESS", "Orchestrator finished.")
        t_end += 1
    att.t_end = t_end


def _write_traces(f: RunFiles, curves: Curves, requests: list[tuple], shift: float, mtime: float) -> None:
    """The sampled episodes of the requested steps, in arrival order, with both indexes."""
    built = []
    for step, a, t_ship, count, kind in requests:
        built += episodes_for_step(curves, step, a, t_ship + shift, count, kind)
    built.sort(key=lambda b: b[0])
    stream = TraceStream()
    for _arrival, ep, idx, ann in built:
        stream.add(ep, idx, ann)
    f.text("monitors/file/traces/stream/00000.jsonl", stream.chunk, mtime)
    f.text("monitors/file/traces/stream.index.jsonl", stream.index, mtime)
    f.text("monitors/file/traces/annotations/orch/00000.jsonl", stream.ann, mtime)
    f.text("monitors/file/traces/annotations/orch.index.jsonl", stream.ann_index, mtime)


def _write_crash_leftovers(f: RunFiles, crashed: Attempt, resumed: Attempt, mtime: float) -> None:
    """torchrun's per-rank logs of the crashed attempt and the user's note on resuming."""
    tdir = f"logs/attempt_{crashed.number}/trainer/torchrun/88fcf936/attempt_0"
    for rank in (0, 1):
        f.text(f"{tdir}/{rank}/stdout.log", "", crashed.t_end)
    f.text(f"{tdir}/0/stderr.log", "", crashed.t_end)
    f.text(f"{tdir}/1/stderr.log", logs.OOM_STDERR, crashed.t_end)
    f.text("reports/resume-after-oom.md",
           "---\ntitle: Resume after CUDA OOM\n---\n\n# Resume after CUDA OOM\n\n"
           f"Attempt {crashed.number} died in `loss.backward()` on rank 1 while training step {crashed.last_step + 1} "
           "(CUDA out of memory on long reasoning traces).\n\n"
           f"Attempt {resumed.number} resumed from `checkpoints/step_{resumed.resume_from}`, so steps "
           f"{resumed.resume_from + 1}..{crashed.last_step} were trained twice. The run was then stopped by hand at "
           f"step {resumed.last_step} to free the GPUs.\n", mtime)


def write_rl_run(out_dir: Path, spec: RLRunSpec, attempts: list[Attempt], t_end: float, trace_steps: set[int],
                 *, with_traces: bool) -> Path:
    """Simulate the attempts back to back (relative times), shift them so the last event lands at
    `t_end`, and write the run directory with matching file mtimes."""
    curves = Curves(spec)
    out = _Events()
    cum: dict = {}
    t = 0.0
    for att in attempts:
        att.t_start = t
        _simulate_attempt(curves, out, att, cum, trace_steps if with_traces else set())
        t = att.t_end + RELAUNCH_GAP_S
    shift = t_end - attempts[-1].t_end
    for att in attempts:
        att.t_start += shift
        att.t_end += shift
    run = out_dir / spec.name
    f = RunFiles(run)
    for att in attempts:
        write_rl_configs(f, spec, att.number, att.t_start, resume_step=att.resume_from)
    last = attempts[-1].number
    f.link("configs/latest", f"attempt_{last}", attempts[-1].t_start)
    ends = {att.number: att.t_end for att in attempts}
    for rel, events in out.logs.items():
        events.sort(key=lambda e: (e[0], e[1]))
        lines = [logs.render(ev[0] + shift, ev[2], ev[3]) for ev in events]
        f.text(rel, lines, ends[int(rel.split("/")[1].split("_")[1])])
    f.link("logs/latest", f"attempt_{last}", attempts[-1].t_start)
    out.rows.sort(key=lambda r: (r[0], r[1]))
    f.text("monitors/file/metrics.jsonl",
           [metrics_line(step, tt + shift, values, prod) for tt, _i, step, values, prod in out.rows], t_end)
    plan = {env: {str(st): spec.eval_examples * spec.eval_k for st in range(0, spec.max_steps + 1, spec.eval_interval)}
            for env in spec.eval_envs}
    f.json("monitors/file/plan.json", plan, attempts[0].t_start)
    f.text("trainer_step", str(out.last_trainer_step), t_end)
    if with_traces:
        _write_traces(f, curves, out.traces, shift, t_end)
    crashed = next((att for att in attempts if att.crash), None)
    if crashed is not None:
        _write_crash_leftovers(f, crashed, attempts[-1], t_end)
    f.finish()
    return run
