"""Why a val task failed: Lego-RL's deterministic failure-mode rules (`swe-lego-rl.md` section 8).

Pure functions over what a trial's files say (reward, verifier report, agent log text, edits,
the gold patch's files); `sources/harbor_val.py` reads the files. Rules, in order:

1. reward > 0, or the report's first entry says `resolved` → `success`
2. no `verifier/report.json` → `infra`;  3. patch not applied → `infra`
4. no agent record to read (`agent/openhands_sdk.txt`; rundash falls back to the proxy's
   `proxy_trajectory.json` tool calls when the SDK log was not written) → `infra`
5. ≥ 40 identical consecutive non-empty lines, or ≥ 60,000 output tokens → `dead_loop`
6. an edit touched a gold file → `gold_edited_failed`;  7. edits, none to a gold file →
   `file_loc_fail`;  8. no edits → `no_impl`

When the gold files cannot be read (the task source dir is on another machine), rules 6 and 7
cannot be told apart: such a task is `edited_failed` ("edited, failed; gold files unknown").
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import orjson

CATEGORIES = ("success", "self_verif", "wrong_fix", "gold_edited_failed", "file_loc_fail", "edited_failed",
              "no_impl", "dead_loop", "infra")
LABELS = {"success": "success", "self_verif": "right place, not verified", "wrong_fix": "right place, wrong fix",
          "gold_edited_failed": "gold file edited, failed", "file_loc_fail": "wrong file",
          "edited_failed": "edited, failed (gold files unknown)", "no_impl": "no implementation",
          "dead_loop": "dead loop / budget burned", "infra": "infra"}
DEAD_LOOP_LINES = 40
DEAD_LOOP_TOKENS = 60_000
SDK_READ_BYTES = 3 << 19  # 1.5 MB: the head is enough, degenerate logs run to many MB
EDIT_COMMANDS = ("str_replace", "insert", "append")

_EDIT_BLOCK = re.compile(r"Action:\s*FileEditorAction\s*\n+\s*Arguments:\s*\n(.*?)(?=\nTokens:|\nObservation|\n\s*kind:)",
                         re.DOTALL)
_COMMAND = re.compile(r'command:\s*"([^"]+)"')
_PATH = re.compile(r'path:\s*"([^"]+)"')
_OUTPUT_K = re.compile(r"output\s+([\d.]+)K")
_GOLD = re.compile(r"^\+\+\+ b/(\S+)", re.MULTILINE)
_EDITOR_TOOLS = ("str_replace_editor", "file_editor", "edit_file", "FileEditorTool")


@dataclass(frozen=True)
class Edit:
    command: str
    path: str  # relative to the repo (no /testbed/, no leading /)


def relative(path: str) -> str:
    return path.replace("/testbed/", "", 1).lstrip("/")


def sdk_edits(text: str) -> list[Edit]:
    """FileEditorAction blocks of an OpenHands-SDK log (spec 3.7)."""
    out = []
    for block in _EDIT_BLOCK.findall(text):
        c, p = _COMMAND.search(block), _PATH.search(block)
        if c and p:
            out.append(Edit(c.group(1), relative(p.group(1))))
    return out


def sdk_output_tokens(text: str) -> int | None:
    """The last `output NNK` counter × 1000."""
    found = _OUTPUT_K.findall(text)
    try:
        return int(float(found[-1]) * 1000) if found else None
    except ValueError:
        return None


def longest_repeat(text: str) -> int:
    """The longest run of identical consecutive non-empty (stripped) lines."""
    best = run = 0
    last = None
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        run = run + 1 if line == last else 1
        last = line
        best = max(best, run)
    return best


def gold_files(solve_sh: str) -> list[str]:
    """The files the gold patch touches: `+++ b/<path>` lines of solution/solve.sh."""
    return sorted(set(_GOLD.findall(solve_sh)))


def message_edits(messages: list) -> tuple[list[Edit], str]:
    """Edits and the assistant's text from OpenAI chat messages (the proxy's view): file-editor
    tool calls with a command and a path."""
    edits, text = [], []
    for m in messages if isinstance(messages, list) else []:
        if not isinstance(m, dict) or m.get("role") != "assistant":
            continue
        content = m.get("content")
        text.append(content if isinstance(content, str) else "".join(
            p.get("text", "") for p in content or [] if isinstance(p, dict) and isinstance(p.get("text"), str)))
        for call in m.get("tool_calls") or []:
            fn = call.get("function") if isinstance(call, dict) else None
            if not isinstance(fn, dict) or fn.get("name") not in _EDITOR_TOOLS:
                continue
            args = fn.get("arguments")
            if isinstance(args, str):
                try:
                    args = orjson.loads(args)
                except orjson.JSONDecodeError:
                    continue
            if isinstance(args, dict) and isinstance(args.get("command"), str) and isinstance(args.get("path"), str):
                edits.append(Edit(args["command"], relative(args["path"])))
    return edits, "\n".join(text)


def _touches_gold(edit: Edit, gold: list[str]) -> bool:
    if edit.path in gold:
        return True
    if edit.command == "create":  # a new file counts only on an exact path
        return False
    base = edit.path.rsplit("/", 1)[-1]
    return any(g.rsplit("/", 1)[-1] == base for g in gold)


@dataclass(frozen=True)
class TrialFacts:
    """What the rules look at, as read from one trial's files (None: not there / unreadable)."""

    reward: float | None
    report: dict | None  # the first value of verifier/report.json
    agent_text: str | None  # the SDK log's head, or the assistant text of the proxy trajectory
    edits: list[Edit] | None  # None when there is no agent record
    output_tokens: int | None
    gold: list[str] | None  # None when the gold patch cannot be read
    report_problem: str | None = None  # why report.json could not be read, when it is there


def decided_by_verifier(reward: float | None, report: dict | None) -> bool:
    """Rules 1-3 decide (success or infra) without the agent's record."""
    return (reward is not None and reward > 0) or report is None or report.get("resolved") is True \
        or report.get("patch_successfully_applied") is False


def classify(f: TrialFacts) -> tuple[str, str]:
    """(category, the rule that decided it) for one trial."""
    if (f.reward is not None and f.reward > 0) or (isinstance(f.report, dict) and f.report.get("resolved") is True):
        return "success", "reward > 0 or resolved"
    if f.report is None:
        return "infra", f.report_problem or "no verifier/report.json"
    if f.report.get("patch_successfully_applied") is False:
        return "infra", "patch not applied"
    if f.agent_text is None or f.edits is None:
        return "infra", "no agent record (openhands_sdk.txt, proxy_trajectory.json)"
    repeat = longest_repeat(f.agent_text)
    if repeat >= DEAD_LOOP_LINES:
        return "dead_loop", f"{repeat} identical lines in a row"
    if f.output_tokens is not None and f.output_tokens >= DEAD_LOOP_TOKENS:
        return "dead_loop", f"{f.output_tokens:,} output tokens"
    changes = [e for e in f.edits if e.command in EDIT_COMMANDS]
    if f.gold is not None and any(_touches_gold(e, f.gold) for e in f.edits if e.command in (*EDIT_COMMANDS, "create")):
        return "gold_edited_failed", "edited a gold file"
    if changes:
        if f.gold is None:
            return "edited_failed", "edits; gold files unknown"
        return "file_loc_fail", "edits, none to a gold file"
    return "no_impl", "no edits"


def order(categories) -> list[str]:
    """Categories in display order (unknown ones last)."""
    return sorted(set(categories), key=lambda c: (CATEGORIES.index(c) if c in CATEGORIES else len(CATEGORIES), c))
