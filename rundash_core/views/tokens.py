"""One episode's tokens for the Trajectory page's Per-token and Rendered views (prime-rl spec 8.2
"Per-token overlays"): token ids decoded to text pieces with a local tokenizer.json, the overlays
(advantage, sampler and trainer logprob, entropy, mismatch KL, the IPO stable mask, the loss and
content masks) as one tidy frame, their colour scales, and the HTML of coloured token spans.

Every string of run data that goes into HTML passes `html.escape`; without a tokenizer a token
shows as its id, `⟨1234⟩`. Decoded text is run text, so it passes the gate (`rundash_core.safety.gate`):
each trace's text is redacted whole and every token overlapping a hidden span is hidden (a secret
split over tokens), unless the run reveals.
"""
from __future__ import annotations

import html
import math
import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from tokenizers import Tokenizer, decoders

from rundash_core import frames
from rundash_core.numbers import finite_float
from rundash_core.safety.gate import hidden_spans
from rundash_core.safety.redact import HIDDEN
from rundash_core.views.tokenizer_files import TokenizerLookup, find_tokenizer, model_names

DEFAULT_IPO_EPS = 0.1  # prime-rl spec 8.2: `loss.eps` when `loss.type == "ipo"`, else 0.1
SPAN_LIMIT = 4000      # token spans drawn at once (the page pages through longer episodes)


@dataclass(frozen=True)
class Overlay:
    column: str
    label: str
    kind: str                # 'signed' (diverging, centred at 0), 'unsigned' (sequential) or 'mask'
    help: str
    quiet: str = "low"       # unsigned: the end drawn faintest ('high' for logprobs: 0 is unremarkable)
    on_off: tuple[str, str] = ("", "")  # mask: what True and False mean


OVERLAYS = {o.column: o for o in (
    Overlay("advantage", "Advantage", "signed", "the token's advantage (orchestrator)"),
    Overlay("logprob", "Logprob", "unsigned", "the sampler's (inference) logprob", quiet="high"),
    Overlay("trainer_logprob", "Trainer logprob", "unsigned", "the trainer's logprob", quiet="high"),
    Overlay("entropy", "Entropy", "unsigned", "the trainer's entropy at the token"),
    Overlay("mismatch_kl", "Mismatch KL", "unsigned", "exp(d) − d − 1, d = trainer − sampler logprob"),
    Overlay("ipo_stable", "IPO stable", "mask", "|exp(trainer lp) − exp(sampler lp)| ≤ eps",
            on_off=("stable", "outside eps")),
    Overlay("mask", "Loss mask", "mask", "in the loss (sampled and trainable)", on_off=("in the loss", "not")),
    Overlay("is_content", "Content mask", "mask", "message content, not template scaffolding",
            on_off=("content", "template")),
    Overlay("is_masked", "Masked (trainer)", "mask", "masked by the trainer", on_off=("masked", "kept")),
)}
COLORS = {"positive": (46, 160, 67), "negative": (248, 81, 73), "sequential": (56, 139, 253),
          "off": (139, 148, 158)}
ALPHA = (0.06, 0.8)  # faintest and strongest background


# Decoding -----------------------------------------------------------------------------------------
def _byte_level_map() -> dict[str, int]:
    """GPT-2's byte-to-unicode table, inverted: a byte-level BPE piece's characters to its bytes."""
    bs = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


_BYTE_LEVEL = _byte_level_map()


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # Unicode's Cc, but newline and tab


def readable(text: str) -> str:
    """Control characters (but newline and tab) as escapes, so a piece is never invisible or raw."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def id_text(token_id: int) -> str:
    return f"⟨{int(token_id)}⟩"


def _partial_piece(tokenizer: Tokenizer, token_id: int, byte_level: bool) -> str:
    """A token that ends inside a UTF-8 character, shown as its bytes (`\xe4\xbd`)."""
    raw = tokenizer.id_to_token(token_id) or ""
    if byte_level and raw and all(c in _BYTE_LEVEL for c in raw):
        return bytes(_BYTE_LEVEL[c] for c in raw).decode("utf-8", errors="backslashreplace")
    return raw or id_text(token_id)


def decode_pieces(tokenizer: Tokenizer | None, ids) -> tuple[list[str], list[str]]:
    """(text, piece) per token. `text` is what the token adds to the decoded string (joined, they
    equal `tokenizer.decode(ids)`; "" for a token that ends inside a character, whose text comes
    with the next one); `piece` is what to show for it: the text, else the partial bytes. An id the
    tokenizer does not know (or no tokenizer) is `⟨id⟩` in both."""
    ids = [int(i) for i in ids]
    if tokenizer is None:
        shown = [id_text(i) for i in ids]
        return shown, shown
    byte_level = isinstance(tokenizer.decoder, decoders.ByteLevel)
    size = tokenizer.get_vocab_size(with_added_tokens=True)
    stream = decoders.DecodeStream(skip_special_tokens=False)
    texts, pieces = [], []
    for i in ids:
        if not 0 <= i < size or tokenizer.id_to_token(i) is None:
            texts.append(id_text(i))
            pieces.append(id_text(i))
            continue
        try:
            chunk = stream.step(tokenizer, i)
        except Exception:  # noqa: BLE001 (older tokenizers: "invalid prefix"): this token alone, a fresh stream
            chunk, stream = tokenizer.decode([i], skip_special_tokens=False), decoders.DecodeStream(
                skip_special_tokens=False)
        texts.append(chunk or "")
        pieces.append(chunk if chunk else _partial_piece(tokenizer, i, byte_level))
    return texts, pieces


# Overlays -----------------------------------------------------------------------------------------
def ipo_eps(config: dict | None) -> float:
    """`loss.eps` of the trainer config when `loss.type == "ipo"`, else 0.1 (prime-rl spec 8.2)."""
    config = config if isinstance(config, dict) else {}
    trainer = config.get("trainer") if isinstance(config.get("trainer"), dict) else {}
    for loss in (trainer.get("loss"), config.get("loss")):
        if isinstance(loss, dict) and loss.get("type") == "ipo":
            eps = finite_float(loss.get("eps"))
            if eps is not None and eps >= 0:
                return eps
            return DEFAULT_IPO_EPS
    return DEFAULT_IPO_EPS


def mismatch_kl(trainer_logprob, sampler_logprob) -> np.ndarray:
    """exp(d) − d − 1 with d = trainer − sampler logprob (≥ 0; NaN where either is missing)."""
    d = np.asarray(trainer_logprob, dtype="float64") - np.asarray(sampler_logprob, dtype="float64")
    with np.errstate(over="ignore", invalid="ignore"):  # a garbage logprob is inf, not a warning
        return np.expm1(d) - d


def ipo_stable(trainer_logprob, sampler_logprob, eps: float) -> np.ndarray:
    """1.0 where |exp(trainer lp) − exp(sampler lp)| ≤ eps, 0.0 beyond, NaN where either is missing."""
    with np.errstate(over="ignore", invalid="ignore"):
        dp = np.exp(np.asarray(trainer_logprob, dtype="float64")) - np.exp(np.asarray(sampler_logprob, dtype="float64"))
    return np.where(np.isnan(dp), np.nan, (np.abs(dp) <= eps).astype("float64"))


def _coverage(tokens: pd.DataFrame) -> list[str]:
    """Streams that hold values at only part of the loss mask (a node whose stream did not fit)."""
    if "mask" not in tokens:
        return []
    mask = tokens["mask"].fillna(False).astype(bool).to_numpy()
    out = []
    for col in ("logprob", "advantage", "trainer_logprob", "entropy"):
        if col in tokens:
            have = int(tokens[col].notna().to_numpy()[mask].sum())
            if 0 < have < int(mask.sum()):
                out.append(f"{col} has {have:,} values for {int(mask.sum()):,} loss-mask tokens")
    return out


def _as_float(values: pd.Series) -> np.ndarray:
    """A mask column (bool, 1.0/0.0, or object with gaps) as 1.0 / 0.0 / NaN."""
    return np.asarray([np.nan if v is None or v != v else float(bool(v)) for v in values], dtype="float64")


def token_table(tokens: pd.DataFrame | None, *, tokenizer: Tokenizer | None = None,
                eps: float = DEFAULT_IPO_EPS, reveal: bool = False) -> tuple[pd.DataFrame, list[str]]:
    """One row per token (position over the episode, trace, node, token_id, text, piece, then every
    overlay the streams allow), and the length mismatches between streams, in words. Tokens
    overlapping a secret read HIDDEN (the first of a run of them; the rest "") unless `reveal`."""
    if not isinstance(tokens, pd.DataFrame) or tokens.empty or "token_id" not in tokens:
        return pd.DataFrame({"position": [], "token_id": [], "text": [], "piece": []}), []
    tokens = tokens.reset_index(drop=True)
    notes = [str(n) for n in tokens.attrs.get("mismatches", [])] + _coverage(tokens)
    out = {"position": np.arange(len(tokens))}
    for col in ("trace", "node", "parent"):
        if col in tokens:
            out[col] = tokens[col].to_numpy()
    out["token_id"] = tokens["token_id"].to_numpy()
    text, piece = np.empty(len(tokens), dtype=object), np.empty(len(tokens), dtype=object)
    for _, part in (tokens.groupby("trace", sort=False) if "trace" in tokens else [(0, tokens)]):
        texts, pieces = decode_pieces(tokenizer, part["token_id"])  # one stream per trace
        text[part.index], piece[part.index] = (texts, pieces) if reveal else hide_secret_tokens(texts, pieces)
    out["text"], out["piece"] = text, piece
    for col in ("advantage", "logprob", "trainer_logprob", "entropy"):
        if col in tokens:
            out[col] = tokens[col].to_numpy(dtype="float64")
    if "logprob" in out and "trainer_logprob" in out:
        kl = mismatch_kl(out["trainer_logprob"], out["logprob"])
        if "mismatch_kl" in tokens:  # a recorded value where the two logprobs are not both there
            kl = np.where(np.isnan(kl), tokens["mismatch_kl"].to_numpy(dtype="float64"), kl)
        out["mismatch_kl"] = kl
        out["ipo_stable"] = ipo_stable(out["trainer_logprob"], out["logprob"], eps)
    elif "mismatch_kl" in tokens:
        out["mismatch_kl"] = tokens["mismatch_kl"].to_numpy(dtype="float64")
    for col in ("mask", "is_content", "is_masked"):
        if col in tokens:
            out[col] = _as_float(tokens[col])
    return pd.DataFrame(out), notes


def hide_secret_tokens(texts: list[str], pieces: list[str]) -> tuple[list[str], list[str]]:
    """(text, piece) with every token overlapping a span the gate hides in the joined text set to
    HIDDEN (the first token of a hidden run) or "" (the rest)."""
    spans = hidden_spans("".join(texts))
    if not spans:
        return texts, pieces
    texts, pieces = list(texts), list(pieces)
    start, k, last = 0, 0, -2
    for i, t in enumerate(texts):
        end = start + len(t)
        while k < len(spans) and spans[k][1] <= start:
            k += 1
        if k < len(spans) and spans[k][0] < max(end, start + 1) and (end > start or spans[k][0] <= start):
            texts[i] = pieces[i] = "" if last == i - 1 else HIDDEN
            last = i
        start = end
    return texts, pieces


def overlays_in(table: pd.DataFrame) -> list[str]:
    """The overlays this table can draw (a column with at least one value), in display order."""
    return [c for c in OVERLAYS if c in table and table[c].notna().any()]


def default_overlay(table: pd.DataFrame) -> str | None:
    """The first overlay whose values differ (an all-zero advantage colours nothing), else the first."""
    options = overlays_in(table)
    return next((c for c in options if table[c].nunique(dropna=True) > 1), options[0] if options else None)


def rendered_texts(table: pd.DataFrame) -> list[tuple[str, str]]:
    """(which text, the token ids decoded as one text) per branch of each trace, for the Rendered
    view: joining the nodes along a root→leaf path gives the exact model input plus output (prime-rl
    spec 5.5), while joining every node of a branched trace would repeat and mix its turns. A table
    without the tree (`parent`) is one text per trace; the label is empty when there is one text."""
    if table.empty:
        return []
    traces = list(table.groupby("trace", sort=True)) if "trace" in table else [(0, table)]
    out = []
    for t, part in traces:
        paths = _branch_paths(part) if {"node", "parent"} <= set(part.columns) else None
        if paths is None:
            out.append((f"Trace {int(t) + 1}", "".join(part["text"])))
            continue
        texts = {node: "".join(rows["text"]) for node, rows in part.groupby("node", sort=False)}
        for b, path in enumerate(paths):
            out.append((f"Trace {int(t) + 1} · branch {b + 1} of {len(paths)}" if len(paths) > 1 else
                        f"Trace {int(t) + 1}", "".join(texts[n] for n in path)))
    return [("" if len(out) == 1 else label, text) for label, text in out]


def _branch_paths(part: pd.DataFrame) -> list[list[int]]:
    """Root→leaf node paths of one trace's token table (`frames.leaf_paths`); a parent loop with
    no leaf: its nodes in order."""
    parent = dict(zip(part["node"].astype(int), part["parent"].astype(int)))
    return frames.leaf_paths(parent) or [sorted(parent)]


# Colour scales ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Scale:
    overlay: Overlay
    lo: float
    hi: float


def scale_for(table: pd.DataFrame, column: str) -> Scale:
    """The overlay's range over the whole episode (not the page shown): signed ones symmetric at 0."""
    overlay = OVERLAYS[column]
    values = table[column].to_numpy(dtype="float64") if column in table else np.array([])
    values = values[np.isfinite(values)]
    if overlay.kind == "mask" or values.size == 0:
        return Scale(overlay, 0.0, 1.0)
    if overlay.kind == "signed":
        m = float(np.abs(values).max())
        return Scale(overlay, -m if m else 0.0, m)
    return Scale(overlay, float(values.min()), float(values.max()))


def _rgba(rgb: tuple[int, int, int], t: float) -> str:
    a = ALPHA[0] + (ALPHA[1] - ALPHA[0]) * min(1.0, max(0.0, t))
    return f"rgba({rgb[0]},{rgb[1]},{rgb[2]},{a:.3f})"


def color(value: float, scale: Scale) -> str | None:
    """The background of a token: diverging red/green around 0 for signed overlays, one hue
    faint-to-strong for unsigned ones, two colours for masks; None for no value."""
    if value is None or not math.isfinite(value):
        return None
    kind = scale.overlay.kind
    if kind == "mask":
        return _rgba(COLORS["positive"], 0.5) if value else _rgba(COLORS["off"], 0.25)
    if kind == "signed":
        m = max(abs(scale.lo), abs(scale.hi))
        t = abs(value) / m if m > 0 else 0.0
        return _rgba(COLORS["positive"] if value > 0 else COLORS["negative"] if value < 0 else COLORS["off"], t)
    span = scale.hi - scale.lo
    t = (value - scale.lo) / span if span > 0 else 0.0
    return _rgba(COLORS["sequential"], 1.0 - t if scale.overlay.quiet == "high" else t)


def _number(v: float) -> str:
    return f"{v + 0.0:.4g}"  # (+ 0.0: -0.0 reads 0)


def legend_html(scale: Scale) -> str:
    """A swatch bar with the scale's ends (masks: the two colours and what they mean)."""
    o = scale.overlay
    chip = '<span style="display:inline-block;width:1.2em;height:0.9em;background:{};margin:0 0.3em"></span>'
    if o.kind == "mask":
        on, off = (html.escape(x) for x in o.on_off)
        return (f'<div style="font-size:0.8rem">{html.escape(o.label)}: {chip.format(color(1.0, scale))}{on}'
                f'{chip.format(color(0.0, scale))}{off}</div>')
    if o.kind == "signed":
        stops = [color(scale.lo, scale), color(0.0, scale), color(scale.hi, scale)]
    else:
        stops = [color(scale.lo, scale), color(scale.hi, scale)]
    bar = (f'<span style="display:inline-block;width:12em;height:0.9em;vertical-align:middle;margin:0 0.4em;'
           f'background:linear-gradient(to right,{",".join(stops)})"></span>')
    middle = " · 0 at the centre" if o.kind == "signed" else ""
    return (f'<div style="font-size:0.8rem">{html.escape(o.label)}: {_number(scale.lo)}{bar}{_number(scale.hi)}'
            f'{middle} · no colour: no value</div>')


# Token spans --------------------------------------------------------------------------------------
def spans_html(table: pd.DataFrame, column: str | None, *, start: int = 0, stop: int | None = None) -> str:
    """Tokens [start, stop) as inline spans coloured by the overlay `column` (None: plain), each
    with its values in a `title` (hover). Every token string is HTML-escaped."""
    stop = min(len(table), start + SPAN_LIMIT if stop is None else stop)
    scale = scale_for(table, column) if column in OVERLAYS else None
    page = table.iloc[start:stop]
    labels = [(OVERLAYS[c].label.lower(), page[c].tolist()) for c in OVERLAYS if c in page]
    shade = page[column].tolist() if scale else [None] * len(page)
    out = ['<div style="font-family:monospace;font-size:0.85rem;line-height:1.7;white-space:pre-wrap;'
           'word-break:break-word">']
    for k, (pos, token_id, text, piece) in enumerate(zip(page["position"], page["token_id"], page["text"],
                                                          page["piece"])):
        title = [f"#{pos}", f"id {token_id}", repr(text or piece)]
        title += [f"{label} {_number(v[k])}" for label, v in labels if math.isfinite(v[k])]
        bg = color(shade[k], scale) if scale else None
        style = f' style="background:{bg}"' if bg else ""
        out.append(f'<span title="{html.escape(readable(" · ".join(title)), quote=True)}"{style}>'
                   f'{html.escape(readable(piece).replace(chr(10), "↵" + chr(10)))}</span>')
    out.append("</div>")
    return "".join(out)


# One episode ---------------------------------------------------------------------------------------
@dataclass
class TokenView:
    """What the page draws for one episode's tokens."""

    table: pd.DataFrame
    notes: list[str] = field(default_factory=list)     # length mismatches between streams
    lookup: TokenizerLookup = field(default_factory=TokenizerLookup)
    eps: float = DEFAULT_IPO_EPS


def episode_token_view(run, episode, *, environ: dict | None = None) -> TokenView:
    """The episode's token table decoded with the run's local tokenizer (if any is found)."""
    lookup = find_tokenizer(model_names(run, episode), environ=environ)
    try:
        eps = ipo_eps(run.config())
    except Exception:  # noqa: BLE001 (an unreadable config: the spec's default)
        eps = DEFAULT_IPO_EPS
    table, notes = token_table(episode.tokens, tokenizer=lookup.tokenizer, eps=eps,
                               reveal=getattr(run, "reveal", False))
    return TokenView(table=table, notes=notes, lookup=lookup, eps=eps)
