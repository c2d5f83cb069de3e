"""One verifiers `Episode.to_record()` record as `frames.Episode` (prime-rl spec 5.5, 5.6): messages
with reasoning, tool calls and tool results, rewards by component, env metrics, ids, timing, and
the token streams with annotations folded on (newest wins; compact values spread back to full
length along each branch). Pure mapping: reading the record is `prime_rl_traces`."""
from __future__ import annotations

import numpy as np
import orjson
import pandas as pd

from rundash_core import frames
from rundash_core.io.jsonl import dict_or_empty, list_or_empty
from rundash_core.numbers import finite_float

TOKEN_COLUMNS = {"logprobs": "logprob", "advantages": "advantage", "reference_logprobs": "reference_logprob",
                 "trainer_logprobs": "trainer_logprob", "entropies": "entropy", "is_masked": "is_masked",
                 "mismatch_kl": "mismatch_kl"}


MAX_INT = 1 << 53  # pandas may pass an Int64 column through float64: exact up to 2**53


def _int(v) -> int | None:
    """An int that fits the frames' Int64 columns exactly (orjson parses up to 2**64 - 1: a larger
    one made the listing raise OverflowError)."""
    return v if isinstance(v, int) and not isinstance(v, bool) and -MAX_INT <= v <= MAX_INT else None

def _merge(into: dict, new: dict) -> None:
    for k, v in new.items():
        if isinstance(v, dict) and isinstance(into.get(k), dict):
            _merge(into[k], v)
        else:
            into[k] = v

def branches(nodes: list[dict]) -> list[list[int]]:
    """Root→leaf node paths, one per leaf, in leaf order."""
    return frames.leaf_paths({i: _int(n.get("parent")) for i, n in enumerate(nodes)})

def token_parents(nodes: list) -> dict[int, int]:
    """Per node, the nearest node above it that has tokens (-1: none): what the token table keeps
    of the tree, so a branch's tokens can be joined along its path (a node without tokens, a
    system prompt sent as text, is stepped over)."""
    has_tokens = {i for i, n in enumerate(nodes) if isinstance(n, dict) and isinstance(n.get("token_ids"), list)
                  and n["token_ids"]}
    out = {}
    for i, node in enumerate(nodes):
        p, guard = _int(node.get("parent")) if isinstance(node, dict) else None, 0
        while p is not None and 0 <= p < len(nodes) and p not in has_tokens and guard <= len(nodes):
            p, guard = (_int(nodes[p].get("parent")) if isinstance(nodes[p], dict) else None), guard + 1
        out[i] = p if p is not None and p in has_tokens and p != i else -1
    return out

def fold(trace: dict, annotations: list[dict]) -> None:
    """Apply annotation records to a trace in place (spec 5.6): info deep-merged; each branch
    stream walked along the branch's nodes, kept at mask positions, taken by a node only when all
    its kept values are non-null (`is_masked` keeps nulls)."""
    nodes = [n for n in list_or_empty(trace.get("nodes")) if isinstance(n, dict)]
    paths = branches(nodes)
    for rec in annotations:
        if isinstance(rec.get("info"), dict):
            info = trace.setdefault("info", {})
            if isinstance(info, dict):
                _merge(info, rec["info"])
        for br in list_or_empty(rec.get("branches")):
            b = _int(br.get("index")) if isinstance(br, dict) else None
            if b is None or not 0 <= b < len(paths):
                continue
            for name, values in br.items():
                if name == "index" or not isinstance(values, list):
                    continue
                pos = 0
                for i in paths[b]:
                    node = nodes[i]
                    n = len(list_or_empty(node.get("token_ids")))
                    mask = list_or_empty(node.get("mask"))
                    part = values[pos:pos + n]
                    pos += n
                    kept = [v for v, m in zip(part, mask) if m]
                    if len(part) == n and (name == "is_masked" or all(v is not None for v in kept)):
                        node[name] = kept

def _text(content) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for p in content:
            if isinstance(p, dict) and p.get("type") == "text":
                parts.append(str(p.get("text", "")))
            elif isinstance(p, dict) and p.get("type") == "image_url":
                parts.append("[image]")
            else:
                parts.append(p if isinstance(p, str) else orjson.dumps(p).decode())
        return "".join(parts)
    return orjson.dumps(content).decode()

def message(node: dict) -> frames.Message:
    m = dict_or_empty(node.get("message"))
    calls = []
    for c in list_or_empty(m.get("tool_calls")):
        if not isinstance(c, dict):
            continue
        fn = dict_or_empty(c.get("function"))  # (OpenAI shape)
        args = c.get("arguments", fn.get("arguments", ""))
        calls.append(frames.ToolCall(name=str(c.get("name") or fn.get("name") or ""),
                                     arguments=args if isinstance(args, str) else orjson.dumps(args).decode(),
                                     id=c.get("id") if isinstance(c.get("id"), str) else None))
    reasoning = m.get("reasoning_content")
    return frames.Message(role=str(m.get("role") or "unknown"), content=_text(m.get("content")),
                          reasoning=reasoning if isinstance(reasoning, str) and reasoning else None,
                          tool_calls=calls, tool_call_id=m.get("tool_call_id"),
                          tokens=len(node["token_ids"]) if isinstance(node.get("token_ids"), list) else None)

def token_frame(traces: list[dict]) -> pd.DataFrame | None:
    """One row per token of every node: trace, node, position, token_id, mask, then the compact
    streams spread to full length (NaN where the mask is False); `is_content` as 1.0 / 0.0.
    `attrs["mismatches"]` names each stream whose length did not fit its node (it is left out).
    Columns are built as numpy arrays across nodes and joined once (one frame per episode, not
    one per node: opening an episode is what the Trajectory page waits for)."""
    nodes, mismatches = [], []  # (n, {column: array}) per node with tokens
    for t, trace in enumerate(traces):
        parents = token_parents(list_or_empty(trace.get("nodes")))
        for i, node in enumerate(list_or_empty(trace.get("nodes"))):
            ids = node.get("token_ids") if isinstance(node, dict) else None
            if not isinstance(ids, list) or not ids:
                continue
            n = len(ids)
            where = f"trace {t} node {i}: "  # a stream of the wrong length or type is dropped, and said so
            token_ids = _array(ids, "int64")
            if token_ids is None:
                mismatches.append(f"{where}token_ids are not all whole numbers (no token view)")
                continue
            mask = np.zeros(n, dtype=bool)
            m = list_or_empty(node.get("mask"))
            mask[:min(n, len(m))] = [bool(v) for v in m[:n]]
            cols = {"trace": np.full(n, t), "node": np.full(n, i), "parent": np.full(n, parents[i]), "position": np.arange(n),
                    "token_id": token_ids, "mask": mask}
            if len(m) != n:
                mismatches.append(f"{where}mask has {len(m)} values for {n} tokens")
            content = list_or_empty(node.get("is_content"))  # full length (1.0 / 0.0), or empty: not recorded
            if len(content) == n:
                cols["is_content"] = np.asarray([bool(v) for v in content], dtype="float64")
            elif content:
                mismatches.append(f"{where}is_content has {len(content)} values for {n} tokens")
            for name, col in TOKEN_COLUMNS.items():
                values = node.get(name)
                kept = _array([np.nan if v is None else v for v in values], "float64") if isinstance(
                    values, list) and len(values) == int(mask.sum()) else None
                if kept is not None:
                    full = np.full(n, np.nan)
                    full[mask] = kept
                    cols[col] = full
                elif isinstance(values, list) and len(values) == int(mask.sum()):
                    mismatches.append(f"{where}{name} are not all numbers")
                elif isinstance(values, list):
                    mismatches.append(f"{where}{name} has {len(values)} values for {int(mask.sum())} loss-mask tokens")
            nodes.append((n, cols))
    if not nodes:
        return None
    names = [c for c in ("trace", "node", "parent", "position", "token_id", "mask", "is_content", *TOKEN_COLUMNS.values())
             if any(c in cols for _n, cols in nodes)]
    out = pd.DataFrame({c: np.concatenate([cols[c] if c in cols else np.full(n, np.nan) for n, cols in nodes])
                        for c in names})
    out.attrs["mismatches"] = mismatches
    return out


def _array(values: list, dtype: str) -> np.ndarray | None:
    """`values` as a numpy array of `dtype`, or None when one is not a number of that kind (a
    string, a dict, an int past 64 bits): the record is data, not a promise."""
    bad = (str, bytes, dict, list, bool) if dtype == "int64" else (str, bytes, dict, list)  # is_masked: bools
    if any(isinstance(v, bad) or v is None for v in values):
        return None
    try:
        return np.asarray(values, dtype=dtype)
    except (TypeError, ValueError, OverflowError):
        return None


def _timing(trace: dict) -> dict[str, float]:
    timing = dict_or_empty(trace.get("timing"))
    out = {}
    for phase, v in timing.items():
        if not isinstance(v, dict):
            continue
        start, end = finite_float(v.get("start")), finite_float(v.get("end"))
        if start is not None and end is not None:
            out[phase] = end - start
        for sub, w in v.items():
            if isinstance(w, dict) and (d := finite_float(w.get("duration"))) is not None:
                out[f"{phase}.{sub}"] = d
    return out

def to_episode(record: dict, row: dict, run_id: str, annotations: dict[str, list[dict]]) -> frames.Episode:
    """A verifiers Episode record (annotations folded) as `frames.Episode`; `row` is its samples row."""
    if "traces" not in record and "nodes" in record:  # an older Trace-per-line record
        record = {**{k: v for k, v in record.items() if k not in ("nodes", "calls")}, "traces": [record]}
    traces = [t for t in list_or_empty(record.get("traces")) if isinstance(t, dict)]
    for t in traces:
        fold(t, annotations.get(t["id"], []) if isinstance(t.get("id"), str) else [])
    several = len(traces) > 1
    rewards, metrics, timing, messages, errors = {}, {}, {}, [], []
    for k, t in enumerate(traces):
        prefix = f"{dict_or_empty(t.get('agent')).get('name') or k}/" if several else ""
        for name, r in dict_or_empty(t.get("rewards")).items():
            score = finite_float(r.get("score") if isinstance(r, dict) else r, keep_nan_inf=True)  # as logged
            if score is not None:
                rewards[prefix + name] = score
        for name, v in dict_or_empty(t.get("metrics")).items():
            if (x := finite_float(v, keep_nan_inf=True)) is not None:  # as logged
                metrics[prefix + name] = x
        timing.update({prefix + k2: v for k2, v in _timing(t).items()})
        messages += [message(n) for n in list_or_empty(t.get("nodes")) if isinstance(n, dict)]
        errors += [e for e in list_or_empty(t.get("errors")) if isinstance(e, dict)]
    errors = [e for e in list_or_empty(record.get("errors")) if isinstance(e, dict)] + errors
    if (total := finite_float(row.get("duration_s"))) is not None:
        timing["total"] = total
    task = dict_or_empty(record.get("task"))
    env = dict_or_empty(record.get("env"))
    ids = {"episode": record.get("id"), "group": dict_or_empty(record.get("group")).get("id"),
           "task": task.get("key") or task.get("hash"), "run": dict_or_empty(record.get("run")).get("id"),
           "traces": ",".join(str(t.get("id")) for t in traces)}
    reward = row.get("reward")
    return frames.Episode(
        sample_id=row["sample_id"], run_id=run_id, split=row["split"], step=row.get("step"),
        task_id=ids["task"], env=env.get("name") or env.get("id") or row.get("env"),
        reward=reward, rewards=rewards, metrics=metrics, messages=messages,
        ids={k: str(v) for k, v in ids.items() if v}, timing=timing,
        error="; ".join(f"{e.get('type', 'error')}: {e.get('message', '')}" for e in errors) or None,
        tokens=token_frame(traces),
        raw={**{k: v for k, v in record.items() if k != "traces"},
             "traces": [{k: v for k, v in t.items() if k != "nodes"} for t in traces]})
