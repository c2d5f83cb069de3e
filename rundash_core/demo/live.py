"""The live writer: a daemon thread per demo folder that appends one training step of the LIVE
run every few seconds (metric rows, log lines, one episode, `trainer_step`), so the dashboard has
a run that is really running. It only ever appends to files that already exist inside the demo
folder (except the next episode's in-flight files under `traces/live/`, replaced every tick), and
re-reads where the run stands whenever the demo was rewritten under it."""
from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import numpy as np

from rundash_core.demo import logs
from rundash_core.demo.curves import Curves, random_uuid
from rundash_core.demo.folder import MARKER
from rundash_core.demo.runs import LIVE
from rundash_core.io.files import read_tail
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
from rundash_core.sources.prime_rl.demo_traces import (
    annotation_index_line,
    compact_json_line,
    episode,
    index_line,
    orch_annotation,
)

_CATCH_UP_S = 60.0  # after a pause, time-keyed rows are filled in for at most this long


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
    """The JSON objects on the whole lines among the last `nbytes` of a JSONL file."""
    data, start = read_tail(path, nbytes)
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


def _due(last: float, every: float, now: float) -> np.ndarray:
    """The times after `last` (or after `now` less the catch-up window) up to `now`, `every` apart."""
    return np.arange(max(last, now - _CATCH_UP_S) + every, now + 1e-9, every)


class _LiveRun:
    """Where the live run's files stand; `tick` appends one training step to all of them."""

    def __init__(self, root: Path):
        self.root = Path(os.path.realpath(root))
        self.run = self.root / LIVE.name
        self.curves = Curves(LIVE)
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
        self.fid = self.file_identity()
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

    def file_identity(self) -> tuple[int, int] | None:
        """(device, inode) of the metrics file: it changes when the demo is rewritten."""
        try:
            st = os.stat(self.metrics)
        except OSError:
            return None
        return st.st_dev, st.st_ino

    def tick(self, now: float) -> None:
        """Append one step; nothing once the run reached max_steps."""
        if self.step >= LIVE.max_steps:
            return
        step = self.step + 1
        curves = self.curves
        lines: list[tuple[float, str]] = []
        times = _due(self.t_inf, INF_EVERY_S, now)
        for tt, r in inference_rows(curves, times, int(now * 10)):
            lines.append((tt, metrics_line(None, tt, r, "orch")))
        if len(times):
            self.t_inf = float(times[-1])
        dtimes = _due(self.t_disp, DISPATCH_EVERY_S, now)
        for tt, r in dispatcher_rows(curves, dtimes, int(now * 10) + 1, lambda _x: step - 1, lambda _x: False):
            lines.append((tt, metrics_line(None, tt, r, "orch")))
        if len(dtimes):
            self.t_disp = float(dtimes[-1])
        t_o = now - 0.05
        orch, sm = orch_row(curves, step, 1, self.cum)
        lines.append((t_o, metrics_line(step, t_o, orch, "orch")))
        rows, lg = trainer_rows(curves, step, 1, sm)
        for i, r in enumerate(rows):
            lines.append((now + i * 0.001, metrics_line(step, now + i * 0.001, r, "trainer")))
        eval_log = None
        if step % LIVE.eval_interval == 0:
            for env in LIVE.eval_envs:
                row, esm = eval_row(curves, env, step, 1)
                lines.append((now + 0.01, metrics_line(step, now + 0.01, row, "orch")))
                eval_log = logs.loguru(now, "SUCCESS", logs.eval_done_msg(env, step, LIVE.eval_k, esm, 31.2))
        lines.sort(key=lambda x: x[0])
        self._append(self.metrics, "".join(line for _t, line in lines))
        self._append(self.logs / "orchestrator.log",
                     logs.loguru(t_o, "SUCCESS", logs.orch_step_msg(step, sm)) + (eval_log or ""))
        self._append(self.logs / "trainer.log",
                     logs.loguru(t_o, "INFO", logs.batch_received_msg(step, int(sm["n"])))
                     + logs.loguru(now, "SUCCESS", logs.trainer_step_msg(step, lg)))
        self._append(self.logs / "inference.log", logs.access("/update_weights"))
        self._episode(step, now)
        tmp = self._inside(self.trainer_step.with_name(f".trainer_step.{os.getpid()}.tmp"))
        tmp.write_text(str(step))
        os.replace(tmp, self.trainer_step)
        self.step = step

    def _build(self, step: int, now: float) -> tuple[dict, dict, float, float]:
        """The step's episode (record, index row, reward, p): the same ids whatever `now` is."""
        rng = self.curves.rng(step, 1, 11)
        env = LIVE.train_envs[step % len(LIVE.train_envs)]
        p = self.curves.reward_p(env, step)
        reward = float(rng.random() < p)
        ep, idx = episode(LIVE, rng, env, step, "train", now - LIVE.step_s * rng.uniform(0.9, 1.5),
                          random_uuid(rng, dashed=True), reward, int(rng.integers(0, 1000)))
        return ep, idx, reward, p

    def _in_flight(self, step: int, now: float) -> None:
        """The next step's episode while it is generated (prime-rl spec 5.7): `live/<trace_id>.jsonl` (open +
        dispatch, then its first nodes and call, then the pending tool result) and one dispatch with
        no trace yet in `live/pending/`; the previous ones are deleted, as when their episode lands."""
        live = self._inside(self.chunk.parent.parent / "live")
        (live / "pending").mkdir(parents=True, exist_ok=True)
        for old in [*live.glob("*.jsonl"), *(live / "pending").glob("*.json")]:
            self._inside(old).unlink(missing_ok=True)
        if step > LIVE.max_steps:
            return
        ep, _index_row, _reward, _reward_chance = self._build(step, now)
        if not ep["traces"]:
            return
        tr = ep["traces"][0]
        t0 = tr["timing"]["start"]
        shift = now - 0.5 - tr["calls"][0]["time"]["end"] if tr["calls"] else now - t0
        moved = lambda v: round(v + shift, 4) if v else 0.0  # noqa: E731 - the trace's clock, moved to now
        phases = tr["timing"]
        timing = {"start": moved(t0), **{k: {"start": moved(phases[k]["start"]), "end": moved(phases[k]["end"])}
                                         for k in ("boot", "setup")},
                  "agent": {"start": moved(phases["agent"]["start"]), "end": 0.0, "model": {"duration": 0.0},
                            "harness": {"duration": 0.0}},
                  "finalize": {"start": 0.0, "end": 0.0}, "scoring": {"start": 0.0, "end": 0.0}}  # agent running
        dispatch = {"id": ep["id"], "kind": "train", "env": ep["env"]["name"], "group": ep["group"]["id"],
                    "task": ep["task"]["key"], "policy_version": step - 1, "step": step, "started": moved(t0)}
        first = next((i for i, n in enumerate(tr["nodes"]) if n["sampled"]), len(tr["nodes"]) - 1)
        lines = [{"trace": tr["id"], "open": {k: tr[k] for k in ("version", "id", "verifiers", "task")},
                  "set": {"agent": tr["agent"], "tools": tr["tools"], "info": {}, "is_completed": False, "ok": True,
                          "timing": timing}, "dispatch": dispatch},
                 {"trace": tr["id"], "nodes": tr["nodes"][:first + 1], "calls": tr["calls"][:1]},
                 {"trace": tr["id"], "pending": [n["message"] for n in tr["nodes"][first + 1:first + 2]]}]
        self._inside(live / f"{tr['id']}.jsonl").write_text("".join(compact_json_line(x) for x in lines))
        other = random_uuid(self.curves.rng(step, 1, 12))
        self._inside(live / "pending" / f"{other}.json").write_text(compact_json_line(
            {**dispatch, "id": other, "env": LIVE.train_envs[(step + 1) % len(LIVE.train_envs)], "started": now}))

    def _episode(self, step: int, now: float) -> None:
        ep, idx, reward, p = self._build(step, now)
        offset = self._append(self.chunk, compact_json_line(ep))  # record first, then its index row (prime-rl spec 5.1)
        self._append(self.index, index_line(self.line, offset, idx))
        self.line += 1
        ann = orch_annotation(ep, step, now, reward - p)
        if ann is not None:
            text, meta = ann
            ann_offset = self._append(self.ann, text)
            self._append(self.ann_index, annotation_index_line(meta, ann_offset))
        self._in_flight(step + 1, now)


class LiveWriter(threading.Thread):
    """Ticks every `interval_s` until stopped; `error` tells why the last tick failed, if it did."""

    def __init__(self, root: Path, interval_s: float):
        super().__init__(name=f"rundash-demo-live:{root}", daemon=True)
        self.root = root
        self.interval_s = interval_s
        self.stop_event = threading.Event()
        self.error: str | None = None

    def run(self) -> None:
        state = None
        while not self.stop_event.wait(self.interval_s):
            try:
                if state is None or state.fid != state.file_identity():  # first tick, or the demo was rewritten
                    state = _LiveRun(self.root)
                state.tick(time.time())
            except Exception as e:  # e.g. the demo is being replaced; never kill the app: remember
                self.error, state = f"{type(e).__name__}: {e}", None  # why, re-read the files next tick

    def stop(self) -> None:
        self.stop_event.set()


_WRITERS: dict[str, LiveWriter] = {}
_WRITERS_LOCK = threading.Lock()


def _key(root: Path) -> str:
    return os.path.realpath(Path(root).expanduser())


def writer_alive(root: Path) -> bool:
    with _WRITERS_LOCK:
        w = _WRITERS.get(_key(root))
        return w is not None and w.is_alive()


def start(folder: Path, interval_s: float) -> LiveWriter:
    """The running writer of `folder`, started if there is none."""
    key = _key(folder)
    with _WRITERS_LOCK:
        w = _WRITERS.get(key)
        if w is not None and w.is_alive():
            return w
        w = LiveWriter(Path(key), float(interval_s))
        _WRITERS[key] = w
        w.start()
        return w


def stop(root: Path, timeout: float) -> bool:
    """Stop the writer of `root` and wait for it; True when one was running."""
    with _WRITERS_LOCK:
        w = _WRITERS.pop(_key(root), None)
    if w is None:
        return False
    w.stop()
    if w is not threading.current_thread():
        w.join(timeout)
    return True
