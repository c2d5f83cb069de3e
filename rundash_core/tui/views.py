"""What the terminal view shows, as plain text and `Doc`s from the frames: the runs list's rows,
the run card, one sample (info, prompt, response, rewards, extra fields) and the log tail. No
textual here, so every rule is unit-tested without a terminal."""
from __future__ import annotations

import json

import pandas as pd

from rundash_core.frames import Episode, Message
from rundash_core.logs.view import ESTIMATED_LEGEND, any_estimated, time_labels
from rundash_core.overview import Overview, resumes_text, trainer_names
from rundash_core.safety.user_regex import UserPattern, compile_user_pattern
from rundash_core.tui.highlight import Doc
from rundash_core.views.display_text import fold_list, format_duration, format_time, step_headline, text_or
from rundash_core.views.trajectory import pretty_arguments, tool_calls_by_id

RUN_COLUMNS = ("run", "kind", "status", "step", "updated")
FIELDS = {"info": "Sample info", "prompt": "Prompt", "response": "Response", "rewards": "Rewards",
          "extra": "Other fields"}
LEVELS = ("TRACE", "DEBUG", "INFO", "SUCCESS", "WARNING", "ERROR", "CRITICAL")
LEVEL_STYLE = {"WARNING": "label", "ERROR": "error", "CRITICAL": "error", "DEBUG": "muted", "TRACE": "muted"}
EXTRA_CHARS = 300  # an extra field longer than this is cut (token id lists, long labels)


def failure(what: str, error: Exception) -> Doc:
    """What could not be read and why, in one line (no traceback on screen)."""
    return Doc().line(f"{what} could not be read: {type(error).__name__}: {str(error)[:300]}", "error")


# Runs list ----------------------------------------------------------------------------------------
def run_rows(runs: pd.DataFrame) -> list[tuple[str, ...]]:
    """The runs list's cells (run, kind, status, step, updated), as text."""
    out = []
    for r in runs.itertuples(index=False):
        step = "n/a" if pd.isna(r.step) else (f"{int(r.step)}/{int(r.max_steps)}" if not pd.isna(r.max_steps)
                                              else str(int(r.step)))
        out.append((str(r.run_id), text_or(r.kind, "n/a"), text_or(r.status, "n/a"), step,
                    format_time(None if pd.isna(r.updated) else r.updated)))
    return out


# Run card -----------------------------------------------------------------------------------------
def card_doc(ov: Overview, problems: list | None = None) -> Doc:
    """The run card as the web page shows it: headline, then one field a line, then the problems."""
    doc = Doc().line(step_headline(ov.step, ov.max_steps), "heading")
    doc.line(f"{ov.name} · {text_or(ov.kind, 'n/a')} · {text_or(ov.flavor, 'n/a')}", "muted")
    if trainer := trainer_names(ov):
        doc.line(trainer, "muted")
    doc.line(ov.path, "muted").line()
    for label, value in (("status", ov.status), ("duration", format_duration(ov.duration_s)),
                         ("model", text_or(ov.model, "n/a")), ("resumes", resumes_text(ov)),
                         ("train envs", fold_list(ov.train_envs, keep=6)),
                         ("eval envs", fold_list(ov.eval_envs, keep=6)),
                         ("created", format_time(ov.created)), ("updated", format_time(ov.updated))):
        _field(doc, label, value, 12)
    if problems:
        doc.line().line(f"{len(problems)} problem{'s' * (len(problems) != 1)} reading this run", "error")
        for p in problems[:50]:
            doc.line(f"  {p}")
    return doc


# Samples ------------------------------------------------------------------------------------------
def _number(v) -> str:
    return "n/a" if v is None or pd.isna(v) else f"{v:.4g}" if isinstance(v, float) else str(v)


def _field(doc: Doc, label: str, value: str, width: int = 14) -> None:
    doc.add(f"{label:<{width}} ", "label").line(value)


def sample_label(row, position: int, total: int) -> str:
    """One entry of the sample picker: where it is in the list, its reward and response length."""
    parts = [f"{position + 1}/{total}", f"reward {_number(row.reward)}"]
    if not pd.isna(row.output_tokens):
        parts.append(f"{int(row.output_tokens)} tok")
    if isinstance(row.env, str) and row.env:
        parts.append(row.env)
    return " · ".join(parts)


def split_transcript(messages: list[Message]) -> tuple[list[Message], list[Message]]:
    """(prompt, response): the messages before the first assistant turn, and the rest."""
    first = next((i for i, m in enumerate(messages) if m.role == "assistant"), len(messages))
    return messages[:first], messages[first:]


def _messages(doc: Doc, messages: list[Message], calls: dict, mask: UserPattern | None, response: bool) -> None:
    for m in messages:
        head = m.role + (f" · {m.tokens} tokens" if m.tokens is not None else "")
        if m.tool_call_id and m.tool_call_id in calls:
            head += f" · result of {calls[m.tool_call_id][1]}"
        doc.line(f"── {head} ──", "role")
        if m.reasoning:
            start = len(doc)
            doc.add_run_text(f"<think>{m.reasoning}</think>", mask=mask)
            doc.spans.append((start, len(doc), "think"))  # all of it, whatever tags it holds
            doc.line()
        if m.content:
            doc.add_run_text(m.content, mask=mask, response=response and m.role == "assistant").line()
        for c in m.tool_calls:
            args, _lang = pretty_arguments(c.arguments)
            start = len(doc)
            doc.line(f"→ tool call {c.name}").add_run_text(args, mask=mask)
            doc.spans.append((start, len(doc), "tool"))
            doc.line()
        if not (m.reasoning or m.content or m.tool_calls):
            doc.line("(empty)", "muted")


def _extra(raw: dict) -> dict[str, str]:
    """The record's other fields (secrets hidden by the gate: `run.episode()`), each as short JSON text."""
    out = {}
    for k, v in raw.items():
        text = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, default=str)
        out[str(k)] = text if len(text) <= EXTRA_CHARS else f"{text[:EXTRA_CHARS]}… ({len(text):,} characters)"
    return out


def sample_doc(ep: Episode, *, fields=tuple(FIELDS), mask: UserPattern | None = None,
               query: str | None = None) -> Doc:
    """One sample as the samples browser shows it: the chosen `fields`, masked and highlighted."""
    doc = Doc()
    if "info" in fields:
        doc.line(FIELDS["info"], "heading")
        info = {"sample": ep.sample_id, "split": ep.split, "step": ep.step, "env": ep.env, "task": ep.task_id,
                "reward": ep.reward}
        for k, v in ep.ids.items():
            info.setdefault(k, v)
        info.update({f"time/{k}": format_duration(v) if v >= 1 else f"{v:.2f}s" for k, v in ep.timing.items()})
        info = {k: v for k, v in info.items() if v is not None and str(v) != ""}
        width = min(max(map(len, info), default=0), 24)
        for label, value in info.items():
            _field(doc, label, _number(value), width)
        if ep.error:
            doc.add(f"{'error':<{width}} ", "error").add_run_text(ep.error).line()
        doc.line()
    prompt, response = split_transcript(ep.messages)
    calls = tool_calls_by_id(ep.messages)
    for name, part, is_response in (("prompt", prompt, False), ("response", response, True)):
        if name in fields:
            chars = sum(len(m.content or "") + len(m.reasoning or "") for m in part)
            doc.line(f"{FIELDS[name]} · {len(part)} message{'s' * (len(part) != 1)} · {chars:,} chars", "heading")
            _messages(doc, part, calls, mask, is_response)
            if not part:
                doc.line("(none)", "muted")
            doc.line()
    if "rewards" in fields and (ep.rewards or ep.metrics):
        doc.line(FIELDS["rewards"], "heading")
        for k, v in {**ep.rewards, **ep.metrics}.items():
            _field(doc, str(k), _number(v), 24)
        doc.line()
    if "extra" in fields and ep.raw:
        doc.line(FIELDS["extra"], "heading")
        for k, v in _extra(ep.raw).items():
            doc.add(f"{k:<24} ", "label").add_run_text(v, mask=mask).line()
    return doc.mark(query)


# Logs ---------------------------------------------------------------------------------------------
def log_levels(lines: pd.DataFrame) -> list[str]:
    """The levels present in a `frames.LOG_LINES` frame, most verbose first (unknown ones last)."""
    present = {str(v).upper() for v in lines["level"].dropna().unique()}
    return [lv for lv in LEVELS if lv in present] + sorted(present - set(LEVELS))


def filter_log_lines(lines: pd.DataFrame, *, levels=None, query: str = "") -> tuple[pd.DataFrame, str | None]:
    """Lines of the chosen levels (None: all; a line with no level is always kept) that match
    `query` (a regex on RE2, any case); (frame, regex error)."""
    keep = pd.Series(True, index=lines.index)
    if levels is not None:
        level = lines["level"].astype(object)
        keep &= level.isna() | level.map(lambda v: str(v).upper() in set(levels))
    pattern, error = compile_user_pattern(query, ignore_case=True) if query else (None, None)
    if pattern is not None:
        keep &= lines["text"].astype(object).map(lambda t: pattern.search(t or "")).astype(bool)
    return lines[keep], error


def logs_doc(lines: pd.DataFrame) -> Doc:
    """The log tail: time (`logview.time_labels`, as the Logs page), level, component, text (secrets
    hidden by the gate: `run.read_log()`); "no logs" when empty."""
    doc = Doc()
    if lines.empty:
        return doc.line("no logs", "muted")
    for stamp, level, component, text in zip(time_labels(lines), lines["level"], lines["component"], lines["text"]):
        stamp = f"{stamp} " if stamp else ""
        level = "" if pd.isna(level) else str(level).upper()
        doc.add(stamp, "muted").add(f"{level:<8} ", LEVEL_STYLE.get(level))
        if not pd.isna(component):
            doc.add(f"{component} ", "role")
        doc.line(str(text) if not pd.isna(text) else "")
    return doc.line(ESTIMATED_LEGEND, "muted") if any_estimated(lines) else doc
