"""The Relax demo run (`docs/formats/relax.md`): `<save>/rollout_result/{train,eval}/<id>.jsonl`,
one file per rollout step written once at the end of that step, rows as `json.dumps(row,
ensure_ascii=False)` with the newest field set.

A GRPO run of Qwen3-4B on arithmetic word problems with a `python` tool: every train file holds
`GROUPS` prompt groups of `K` samples (`group_index` counts up across files), multi-turn responses
(`<think>`, `<tool_call>`, `<tool_response>`) with their response token ids and rollout logprobs.
Most rows are `completed`; some are `truncated` (scored 0), `failed` (a bad tool call, scored 0),
`aborted` (partial response, not scored: reward null) or `pending` (never generated: empty response,
reward null). Eval files at `EVAL_IDS` hold two datasets, `aime24` (numeric reward) and
`gpqa_diamond` (multiple choice, a `{score, acc, pred}` reward), `sample_index` restarting per
dataset. Token ids come from a stand-in tokenizer (words hashed into the Qwen3 vocab range around
Qwen3's real special-token ids). Deterministic for a given end time.
"""
from __future__ import annotations

import json
import math
import zlib
from pathlib import Path

import numpy as np

from rundash_core.demo.curves import SEED
from rundash_core.demo.run_files import RunFiles

STEPS = 10  # train rollout ids 0..STEPS-1
GROUPS, K = 4, 4
EVAL_IDS = (0, 5, 10)
SALT = 13
SPECIAL = {"<|im_start|>": 151644, "<|im_end|>": 151645, "<tool_call>": 151657, "</tool_call>": 151658,
           "<tool_response>": 151665, "</tool_response>": 151666, "<think>": 151667, "</think>": 151668}
_SPLIT_SPECIAL = sorted(SPECIAL, key=len, reverse=True)
_TOOLS = ('{"type": "function", "function": {"name": "python", "description": "Execute Python code in a sandbox and '
          'return stdout/stderr.", "parameters": {"type": "object", "properties": {"code": {"type": "string", '
          '"description": "Python source to run."}}, "required": ["code"]}}}')
SYSTEM_TOOLS = ("You are a helpful assistant. Think step by step inside <think></think>, use tools when useful, and put "
                "the final answer in \\boxed{}.\n\n# Tools\n\nYou may call one or more functions to assist with the user "
                "query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
                f"{_TOOLS}\n</tools>\n\nFor each function call, return a json object with function name and arguments "
                "within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
                "<args-json-object>}\n</tool_call>")
SYSTEM_PLAIN = "You are a helpful assistant. Think step by step inside <think></think>, and put the final answer in \\boxed{}."


def _rng(*salt: int) -> np.random.Generator:
    return np.random.default_rng([SEED, SALT, *salt])


def tokenize(text: str) -> list[int]:
    """Stand-in tokenizer: special tokens by their Qwen3 ids, everything else one id per word piece."""
    ids: list[int] = []
    i = 0
    while i < len(text):
        for sp in _SPLIT_SPECIAL:
            if text.startswith(sp, i):
                ids.append(SPECIAL[sp])
                i += len(sp)
                break
        else:
            j = min((p for sp in _SPLIT_SPECIAL if (p := text.find(sp, i)) >= 0), default=len(text))
            for word in text[i:j].replace("\n", " \n ").split(" "):
                if word:
                    ids.append(198 if word == "\n" else 1000 + zlib.crc32(word.encode()) % 150000)
            i = j
    return ids


def _chat(system: str, user: str) -> str:
    return f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"


def _problem(rng: np.random.Generator) -> tuple[str, str, str]:
    """(question, answer, python code) of one arithmetic word problem."""
    kind = int(rng.integers(0, 4))
    if kind == 0:
        w, p = int(rng.integers(12, 45)), int(rng.integers(100, 180)) // 2 * 2
        return (f"A rectangle has a perimeter of {p} cm and one side of length {w} cm. What is its area in square "
                "centimetres?", str(w * (p // 2 - w)), f"p = {p}\nw = {w}\nh = p // 2 - w\nprint(w * h)")
    if kind == 1:
        a, b, m = int(rng.integers(2, 9)), int(rng.integers(20, 90)), int(rng.integers(7, 30))
        return f"What is the remainder when {a}^{b} is divided by {m}?", str(pow(a, b, m)), f"print(pow({a}, {b}, {m}))"
    if kind == 2:
        n = int(rng.integers(24, 200))
        return (f"What is the sum of all positive divisors of {n}?", str(sum(d for d in range(1, n + 1) if n % d == 0)),
                f"n = {n}\nprint(sum(d for d in range(1, n + 1) if n % d == 0))")
    n = int(rng.integers(50, 400))
    count = sum(1 for x in range(2, n) if all(x % d for d in range(2, int(math.isqrt(x)) + 1)))
    return (f"How many primes are there below {n}?", str(count),
            f"print(sum(1 for x in range(2, {n}) if all(x % d for d in range(2, int(x ** 0.5) + 1))))")


_OPENERS = ("Okay, let me restate the problem", "Alright. So the task boils down to", "Let me parse this.")


def _response(rng: np.random.Generator, q: str, answer: str, code: str, correct: bool, status: str) -> tuple[str, int]:
    """(response text, agent turns) for one sample with the given outcome."""
    opener = _OPENERS[int(rng.integers(0, len(_OPENERS)))]
    wrong = str(int(answer) + int(rng.integers(1, 9)) * (1 if rng.random() < 0.5 else -1)) if answer.lstrip("-").isdigit() else "0"
    if status == "pending":
        return "", 0
    think = f"<think>\n{opener}: {q.rstrip('?').lower()}. I'll compute it with the python tool to be safe.\n</think>\n\n"
    call = f'<tool_call>\n{{"name": "python", "arguments": {json.dumps({"code": code})}}}\n</tool_call>'
    if status == "aborted":
        return think[: max(20, int(len(think) * rng.uniform(0.3, 0.8)))], 1
    if status == "failed":
        return think + '<tool_call>\n{"name": "python", "arguments": {"code": "print(pow(' + "\n</tool_call>", 1
    if status == "truncated":
        loop = " Hmm, let me double check that again by another route."
        return "<think>\n" + f"{opener}: {q.rstrip('?').lower()}." + loop * int(rng.integers(30, 45)), 1
    if rng.random() < 0.3:  # no tool
        final = answer if correct else wrong
        return (f"<think>\n{opener}: {q.rstrip('?').lower()}. This is small enough to do by hand; the result is "
                f"{final}.\n</think>\n\nThe answer is $\\boxed{{{final}}}$."), 1
    out = answer if correct else wrong
    tail = (f"<think>\nThe tool printed {answer}. That matches my rough estimate, so the answer is {answer}.\n</think>\n\n"
            if correct else f"<think>\nThe tool printed {answer}, but I think I need to adjust by the edge case, so "
            f"{out}.\n</think>\n\n")
    return (think + call + "<|im_end|>\n<|im_start|>user\n<tool_response>\n" + answer + "\n</tool_response><|im_end|>\n"
            "<|im_start|>assistant\n" + tail + f"The answer is $\\boxed{{{out}}}$."), 2


def _row(rollout_id: int, index: int, prompt: str, response: str, reward, turns: int, status: str, group: int,
         label: str, rng: np.random.Generator | None, dataset: str | None = None) -> str:
    p_len = len(tokenize(prompt))
    ids = tokenize(response)
    r_len = len(ids)
    row = {"rollout_id": rollout_id, "sample_index": index, "prompt": prompt, "response": response, "reward": reward,
           "prompt_length": p_len, "response_length": r_len, "total_length": p_len + r_len,
           "prompt_token_count": p_len, "response_token_count": r_len, "total_token_count": p_len + r_len,
           "image_count": 0, "image_token_count": 0, "multimodal_token_count": 0, "agent_turns": turns,
           "status": status, "group_index": group, "label": label}
    if dataset is not None:
        row["dataset"] = dataset
    if rng is not None:  # the newest schema: response ids and the rollout engine's logprobs
        lp = -rng.exponential(0.06, r_len)
        spikes = rng.random(r_len) < 0.04
        lp[spikes] = -rng.uniform(0.5, 3.5, int(spikes.sum()))
        row["response_token_ids"] = ids
        row["response_rollout_log_probs"] = [float(np.float32(x)) for x in lp]
    return json.dumps(row, ensure_ascii=False) + "\n"


def _p_correct(step: float) -> float:
    return 0.3 + 0.45 * (1 - math.exp(-step / 4.0))


def _stratified(rng: np.random.Generator, n: int) -> np.ndarray:
    """n uniforms, one per 1/n-wide stratum, shuffled: `u < p` then holds for about p·n of them."""
    return (rng.permutation(n) + rng.random(n)) / n


def _train_file(rid: int) -> list[str]:
    rng = _rng(rid, 1)
    rows = []
    for g in range(GROUPS):
        q, answer, code = _problem(rng)
        prompt = _chat(SYSTEM_TOOLS, q)
        pg = float(np.clip(_p_correct(rid) + rng.normal(0, 0.15), 0.03, 0.97))
        draws = _stratified(rng, K)
        for k in range(K):
            u = rng.random()
            status = ("pending" if u < 0.02 else "aborted" if u < 0.05 else "failed" if u < 0.07
                      else "truncated" if u < 0.12 else "completed")
            correct = status == "completed" and draws[k] < pg
            response, turns = _response(rng, q, answer, code, correct, status)
            reward = None if status in ("pending", "aborted") else float(correct)
            rows.append(_row(rid, g * K + k, prompt, response, reward, turns, status, rid * GROUPS + g, answer, rng))
    return rows


def _eval_file(rid: int) -> list[str]:
    rng = _rng(rid, 2)
    prng = _rng(999)  # the same questions at every eval
    rows = []
    p = _p_correct(rid) - 0.05
    draws = _stratified(rng, 8)
    for i in range(8):
        q, answer, code = _problem(prng)
        correct = draws[i] < p
        status = "truncated" if rng.random() < 0.08 else "completed"
        correct = correct and status == "completed"
        response, turns = _response(rng, q, answer, code, correct, status)
        rows.append(_row(rid, i, _chat(SYSTEM_TOOLS, q), response, float(correct), turns, status, i, answer, None,
                         "aime24"))
    draws = _stratified(rng, 6)
    for i in range(6):
        q, answer, _code = _problem(prng)
        options = [answer] + [str(int(answer) + d) for d in (-3, 4, 11)]
        order = prng.permutation(4)
        letters = "ABCD"
        label = letters[int(np.where(order == 0)[0][0])]
        mc = q + "\n\n" + "\n".join(f"({letters[j]}) {options[order[j]]}" for j in range(4))
        correct = draws[i] < p - 0.05
        pred = label if correct else letters[(letters.index(label) + int(rng.integers(1, 4))) % 4]
        response = (f"<think>\n{_OPENERS[i % 3]}: {q.rstrip('?').lower()}. Comparing with the options, ({pred}) "
                    f"matches.\n</think>\n\nThe answer is $\\boxed{{{pred}}}$.")
        reward = {"score": float(correct), "acc": bool(correct), "pred": pred}
        rows.append(_row(rid, i, _chat(SYSTEM_PLAIN, mc), response, reward, 1, "completed", i, label, None,
                         "gpqa_diamond"))
    return rows


def write_relax_run(out: Path, save: str, t_end: float) -> Path:
    """`out/<save>/rollout_result/…`; each file's mtime is the end of its step, the last at `t_end`."""
    rng = _rng(0)
    step_s = rng.uniform(300, 420, STEPS)
    eval_s = rng.uniform(80, 120, len(EVAL_IDS))
    t = t_end - float(step_s.sum() + eval_s.sum())
    f = RunFiles(out / save)
    evals = dict(zip(EVAL_IDS, eval_s))
    for rid in range(STEPS + 1):
        if rid in evals:
            t += float(evals[rid])
            f.text(f"rollout_result/eval/{rid}.jsonl", _eval_file(rid), t)
        if rid < STEPS:
            t += float(step_s[rid])
            f.text(f"rollout_result/train/{rid}.jsonl", _train_file(rid), t)
    f.text("latest_checkpointed_iteration.txt", f"{STEPS}\n", t)
    f.finish()
    return out / save
