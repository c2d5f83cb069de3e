"""The trace stream (spec 5): Episode records with their message trees (5.5), their index rows
(5.4) and the orchestrator's annotations of shipped episodes (5.6). Built in memory for the
written runs (`TraceStream`) and appended one episode per step by the live writer."""
from __future__ import annotations

import json
import zlib

import numpy as np

from rundash_core.demo.curves import Curves, random_uuid
from rundash_core.demo.specs import ENVS, QUESTIONS, RLRunSpec, tools_of

_ROLE_TOK = {"system": 8948, "user": 872, "assistant": 77091, "tool": 872}


def _tok(text: str, limit: int = 48) -> list[int]:
    return [300 + zlib.crc32(w.encode()) % 151000 for w in text.split()][:limit]


def compact_json_line(obj) -> str:
    return json.dumps(obj, separators=(",", ":")) + "\n"


def index_line(line: int, offset: int, index_row: dict) -> str:
    """The stream index row of the record at 1-based `line`, starting at byte `offset` of chunk 0."""
    return compact_json_line({"line": line, "chunk": 0, "offset": offset, **index_row})


def annotation_index_line(meta: dict, offset: int) -> str:
    return compact_json_line({"trace_id": meta["trace_id"], "chunk": 0, "offset": offset, "info": meta["info"]})


class _TraceBuilder:
    """Grows one trace's message nodes and the model calls that sampled them, keeping the token
    accounting (prompt, cached and completion tokens) and the clock consistent."""

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

    def call_tool(self, name: str, args: dict, reasoning: str, result: str) -> None:
        """An assistant turn that calls one tool, and the tool's answer."""
        call = {"id": f"chatcmpl-tool-{random_uuid(self.rng)}", "type": "function", "name": name,
                "arguments": json.dumps(args)}
        self.add("assistant", None, reasoning=reasoning, tool_calls=[call], finish="tool_calls")
        self.add("tool", result, extra={"tool_call_id": call["id"], "name": name})


def _converse(tr: _TraceBuilder, rng: np.random.Generator, env: str, q: str, answer: str, aux: str,
              reward: float, finish: str) -> dict[str, float]:
    """The turns after the user's question, as the env's agent plays them; returns its metrics."""
    good = reward >= 0.5
    if env == "math-python":
        errors = 0
        if rng.random() < 0.25:
            tr.call_tool("python", {"code": "import sympy\n" + aux}, f"Let me compute this with Python. {q}",
                         "Traceback (most recent call last):\nModuleNotFoundError: No module named 'sympy'")
            errors = 1
        tr.call_tool("python", {"code": aux}, "I'll compute it with the python tool to be safe." if not errors
                     else "sympy is not installed; plain Python is enough.", answer)
        final = answer if good else str(int(answer) + int(rng.integers(1, 9)))
        tr.add("assistant", f"The answer is $\\boxed{{{final}}}$.", reasoning=f"The tool printed {answer}.",
               finish=finish)
        return {"num_tool_calls": float(1 + errors), "num_python_errors": float(errors)}
    if env == "wiki-search":
        tr.call_tool("search_pages", {"query": q.rstrip("?")[-40:]},
                     f"I need to find: {q} I'll search for the page first.",
                     json.dumps([{"page_id": aux, "title": aux.replace("_", " ").title()}]))
        tr.call_tool("read_section", {"section_id": f"{aux}:background"},
                     "The 'Background' section should contain the answer.",
                     f"... {answer} ..." if good else "... (no relevant passage) ...")
        tr.add("assistant", answer if good else "I could not find the answer.", reasoning="Found it." if good else
               "The section does not say.", finish=finish)
        return {"num_tool_calls": 2.0}
    if env == "reverse-text":
        rev = q[::-1]
        if reward < 0.999:
            cut = max(1, int(len(rev) * reward))
            rev = rev[:cut] + q[cut:][: len(rev) - cut]
        tr.add("assistant", rev, reasoning="Reverse it character by character.", finish=finish)
        return {}
    final = answer if good else ("0" if answer != "0" else "1")
    tr.add("assistant", f"**Answer:** $\\boxed{{{final}}}$", reasoning=f"So the task boils down to: {q} "
           "Let me work through it step by step and double check the arithmetic.", finish=finish,
           max_tokens=ENVS[env].max_tokens)
    return {}


def episode(spec: RLRunSpec, rng: np.random.Generator, env: str, step: int, kind: str, t_dispatch: float,
            group_id: str, reward: float, qi: int, *, error: tuple[str, str] | None = None,
            truncated: bool = False) -> tuple[dict, dict]:
    """One Episode record (`vf.Episode.to_record()` shape) and its index row (without line/chunk/offset)."""
    e = ENVS[env]
    q, answer, aux = QUESTIONS[env][qi % len(QUESTIONS[env])]
    data = {"idx": qi, "id": f"{env}-{qi:04d}", "prompt": q, "system_prompt": e.system}
    if answer:
        data["answer"] = answer
    key = format(zlib.crc32(f"{env}/{qi}".encode()), "08x") * 8
    task = {"type": e.task, "data": data, "key": key, "hash": key}
    policy = max(step - 1, 0) if kind == "train" else step
    ep = {"id": random_uuid(rng), "env": {"id": env, "name": env}, "task": task, "group": {"id": group_id},
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
    tr = _TraceBuilder(rng, spec.model, setup_end)
    tools = tools_of(env)
    tr.add("system", e.system, tools=tools or None)
    tr.add("user", q)
    metrics = _converse(tr, rng, env, q, answer, aux, reward, "length" if truncated else "stop")
    agent_end = tr.t
    fin_end = agent_end + rng.uniform(0.05, 0.3)
    score_end = fin_end + rng.uniform(0.005, 0.05)
    arrival = score_end + rng.uniform(0.01, 0.2)
    n_in = sum(c["usage"]["prompt_tokens"] for c in tr.calls)
    n_out = sum(c["usage"]["completion_tokens"] for c in tr.calls)
    model_s = sum(c["time"]["end"] - c["time"]["start"] for c in tr.calls)
    trace_id = random_uuid(rng)
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
                             "model": {"duration": round(model_s, 4)},
                             "harness": {"duration": round(max(agent_end - setup_end - model_s, 0.0), 4)}},
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


def orch_annotation(ep: dict, ship_step: int, ship_time: float, advantage: float | None) -> tuple[str, dict] | None:
    """The orch annotation of a shipped episode (spec 5.6) as (line, index meta): train episodes
    carry a scalar advantage and a full-length `advantages` stream over the branch; eval epochs
    ship with no streams. None for an episode without a trace."""
    if not ep["traces"]:
        return None
    tr = ep["traces"][0]
    info = {"effective": True, "ship": {"step": ship_step, "time": round(ship_time, 4)}}
    branches = []
    if advantage is not None:
        info["advantage"] = round(advantage, 4)
        branches = [{"index": 0, "advantages": [round(advantage, 4) if m else 0.0 for nd in tr["nodes"] for m in nd["mask"]]}]
    rec = {"version": 1, "trace_id": tr["id"], "info": info, "branches": branches}
    return compact_json_line(rec), {"trace_id": tr["id"], "info": info}


class TraceStream:
    """Builds `traces/stream/00000.jsonl` + index and the orch annotation chunk + index in memory."""

    def __init__(self):
        self.line = 1
        self.offset = 0
        self.ann_offset = 0
        self.chunk: list[str] = []
        self.index: list[str] = []
        self.ann: list[str] = []
        self.ann_index: list[str] = []

    def add(self, ep: dict, index_row: dict, ann: tuple[str, dict] | None = None) -> None:
        line = compact_json_line(ep)
        self.chunk.append(line)
        self.index.append(index_line(self.line, self.offset, index_row))
        self.offset += len(line.encode())
        self.line += 1
        if ann is not None:
            text, meta = ann
            self.ann.append(text)
            self.ann_index.append(annotation_index_line(meta, self.ann_offset))
            self.ann_offset += len(text.encode())


def episodes_for_step(curves: Curves, step: int, attempt: int, t_ship: float, count: int,
                      kind: str) -> list[tuple[float, dict, dict, tuple | None]]:
    """About `count` episodes of one step (one GRPO group per env) shipped at `t_ship`:
    (arrival, record, index row, orch annotation) tuples."""
    s = curves.spec
    rng = curves.rng(step, attempt, 6, count, kind == "eval")
    envs = s.train_envs if kind == "train" else s.eval_envs
    per = max(1, count // len(envs))
    built = []
    for env in envs:
        group = random_uuid(rng, dashed=True)
        qi = int(rng.integers(0, 1000))
        p = curves.reward_p(env, step)
        specs = []
        for _ in range(per):
            t_d = t_ship - s.step_s * rng.uniform(0.9, 1.6)
            if kind == "train" and rng.random() < 0.07:
                err = (("SandboxError", "sandbox provisioning failed: create timed out after 600s (status PENDING)")
                       if env == "math-python" else
                       ("EnvError", f"env server {env} worker exited unexpectedly (BrokenProcessPool)"))
                specs.append((t_d, 0.0, err, False))
                continue
            r = float(rng.random() < p) if ENVS[env].binary else float(np.clip(rng.beta(p * 7, (1 - p) * 7), 0, 1))
            trunc = bool(rng.random() < 0.05)
            if trunc and ENVS[env].binary:
                r = 0.0
            specs.append((t_d, r, None, trunc))
        mean = float(np.mean([x[1] for x in specs]))
        for t_d, r, err, trunc in specs:
            ep, idx = episode(s, rng, env, step, kind, t_d, group, r, qi, error=err, truncated=trunc)
            ann = orch_annotation(ep, step, t_ship, r - mean if kind == "train" else None)
            built.append((idx["arrival"], ep, idx, ann))
    return built
