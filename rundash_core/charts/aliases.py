"""Canonical metric aliases, so runs of different frameworks land on one chart.

`ALIASES` names the canonical metrics (with a note and whether it is resolved per data source);
each source says which of its keys stand for each (`Source.aliases`, in
`rundash_core/sources/<kind>/aliases.py`): per alias an ordered `KeyCandidate` list, the first
candidate with a logged key wins (a regex candidate takes its first match in sorted key order).
`alias_table()` shows both to users. Candidates carry a factor for verl's historical scaled keys
(verl.md 8.2: `actor/lr(1e-4)` logs lr × 1e4, so its factor is 1e-4).

"val score" is resolved per data source / eval env (the regex group `ds`; first present candidate
per source) and `canonical_frame` averages the sources per step, unweighted: a run validated on
gsm8k and MATH gets one curve, the mean of its two headline scores, which is what "val score"
usually means when comparing runs. The per-source keys are in `source_key`.

Same name does not always mean same quantity: "KL" is prime-rl's trainer/inference mismatch KL but
verl's PPO KL; the `note` column of `alias_table()` says so.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import pandas as pd


@dataclass(frozen=True)
class KeyCandidate:
    """A logged key (or full-key regex) that stands for an alias or a health concept in one kind
    of run; canonical value = logged value × factor."""

    pattern: str
    factor: float = 1.0
    regex: bool = False
    producer: str | None = None  # only this producer's rows (prime-rl time/step: trainer and orch)


def literal_keys(*keys: str, producer: str | None = None) -> tuple[KeyCandidate, ...]:
    """Candidates for these exact keys, in order (`producer`: only that producer's rows)."""
    return tuple(KeyCandidate(k, producer=producer) for k in keys)


def key_regexes(*patterns: str) -> tuple[KeyCandidate, ...]:
    """Candidates for these full-key regexes, in order."""
    return tuple(KeyCandidate(p, regex=True) for p in patterns)


@dataclass(frozen=True)
class Alias:
    """One canonical metric; its candidates per kind are the sources' (`Source.aliases`)."""

    name: str
    per_source: bool = False  # resolve per `ds` group, mean over sources per step
    note: str = ""


ALIASES: dict[str, Alias] = {a.name: a for a in [
    Alias("reward", note="mean training reward (prime-rl: the effective cohort, all train envs pooled; verl: the "
                         "task score)"),
    Alias("entropy", note="mean token entropy"),
    Alias("KL", note="prime-rl: trainer vs inference mismatch KL; verl: PPO KL (else KL loss to the reference)"),
    Alias("grad norm"),
    Alias("response length", note="mean output tokens per sample (prime-rl: all turns of an episode)"),
    Alias("throughput", note="tokens/s per GPU (prime-rl perf/throughput is the total, so it is not used)"),
    Alias("val score", per_source=True, note="per data source / eval env the first present key; the curve is the "
                                             "unweighted mean over the sources logged at each step"),
    Alias("learning rate"),
    Alias("step time", note="seconds per training step"),
    Alias("generation time per token", note="ms per generated token"),
]}


def _human(c: KeyCandidate) -> str:
    if not c.regex:
        text = c.pattern
    else:
        text = c.pattern.replace("(?P<ds>.+)", "<ds>").replace("[^/]+", "*").replace(r"\d+", "N")
    return text + (f" [{c.producer}]" if c.producer else "")


def alias_table() -> pd.DataFrame:
    """The alias table for users: alias, kind, candidates (in order), conversion, note."""
    from rundash_core import sources  # here, not at the top: the registry imports the sources' tables, which import this

    rows = []
    for a in ALIASES.values():
        for kind in sources.kinds():
            cands = sources.source_for(kind).aliases.get(a.name, ())
            if not cands:
                continue
            conv = "; ".join(f"{_human(c)} × {c.factor:g}" for c in cands if c.factor != 1.0)
            rows.append({"alias": a.name, "kind": kind, "candidates": " → ".join(_human(c) for c in cands),
                         "conversion": conv, "note": a.note})
    return pd.DataFrame(rows, columns=["alias", "kind", "candidates", "conversion", "note"])


def _first(c: KeyCandidate, keys: list[str]) -> list[tuple[str, re.Match | None]]:
    if not c.regex:
        return [(c.pattern, None)] if c.pattern in set(keys) else []
    rx = re.compile(c.pattern)
    return [(k, m) for k in keys if (m := rx.fullmatch(k))]


def _candidates(kind: str, alias: str) -> tuple[Alias, tuple[KeyCandidate, ...]]:
    from rundash_core import sources  # here, not at the top (see alias_table)

    if alias not in ALIASES:
        raise KeyError(f"unknown alias {alias!r}; known: {', '.join(ALIASES)}")
    source = sources.source_for(kind)
    return ALIASES[alias], (source.aliases.get(alias, ()) if source is not None else ())


def resolve_sources(kind: str, keys: Iterable[str], alias: str) -> list[tuple[str, str, KeyCandidate]]:
    """(source, key, candidate) per data source for a per-source alias ("" as the single source of
    the others), sources in sorted order; empty when nothing is logged."""
    a, cands = _candidates(kind, alias)
    ks = sorted({str(k) for k in keys})
    found: dict[str, tuple[str, KeyCandidate]] = {}
    for c in cands:
        for key, m in _first(c, ks):
            src = (m.groupdict().get("ds") or "") if (a.per_source and m is not None) else ""
            found.setdefault(src, (key, c))
        if found and not a.per_source:
            break
    return [(src, *found[src]) for src in sorted(found)]


def resolve(kind: str, keys: Iterable[str], alias: str) -> tuple[str, float] | None:
    """The key an alias reads in a run with these keys and its factor, or None. For "val score"
    this is the first data source's key; `canonical_frame` averages all of them."""
    found = resolve_sources(kind, keys, alias)
    return (found[0][1], found[0][2].factor) if found else None


_COLUMNS = ["step", "time", "metric", "value", "producer", "source_key"]


def canonical_frame(kind: str, tidy: pd.DataFrame, aliases: Iterable[str] | None = None) -> pd.DataFrame:
    """Tidy rows of the resolved keys with `metric` = the alias, value × factor, plus `source_key`."""
    metric = tidy["metric"]
    keys = metric.cat.categories if isinstance(metric.dtype, pd.CategoricalDtype) else metric.astype(str).unique()
    resolved = {name: resolve_sources(kind, keys, name) for name in (aliases or ALIASES)}
    wanted = {key for found in resolved.values() for _src, key, _candidate in found}
    sub = tidy[metric.isin(wanted)]  # one pass over a possibly large frame
    sub = sub.assign(metric=sub["metric"].astype(str))
    parts = []
    for name, found in resolved.items():
        frames = []
        for _src, key, c in found:
            rows = sub[sub["metric"] == key]
            if c.producer is not None:
                rows = rows[rows["producer"] == c.producer]
            frames.append(pd.DataFrame({"step": rows["step"], "time": rows["time"], "value": rows["value"] * c.factor,
                                        "producer": rows["producer"].astype(str), "source_key": key}))
        if not frames:
            continue
        df = pd.concat(frames, ignore_index=True)
        if ALIASES[name].per_source and len(found) > 1:
            df = (df.dropna(subset=["step"]).groupby("step", sort=True)
                  .agg(time=("time", "max"), value=("value", "mean"), producer=("producer", "first"),
                       source_key=("source_key", lambda s: "mean(" + ", ".join(sorted(set(s))) + ")"))
                  .reset_index())
        parts.append(df.assign(metric=name))
    if not parts:
        out = pd.DataFrame({c: [] for c in _COLUMNS})
    else:
        out = pd.concat(parts, ignore_index=True)[_COLUMNS]
    out = out.astype({"step": "Int64", "time": "float64", "value": "float64"})
    for col in ("metric", "producer", "source_key"):
        out[col] = pd.Categorical(out[col].astype(str))
    return out.reset_index(drop=True)
