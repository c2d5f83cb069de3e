"""Chart sections of a run: each source's section table matched against the keys the run logged.

A source's table (`Source.sections`, in `rundash_core/sources/<kind>/sections.py`) lists sections
of panel specs: titles and key patterns (literal keys and full-key `KeyRegex`es). Matched against
the keys a run actually logged, panels without a match and sections without a panel are dropped,
so one table serves every era of a format. This module is the kind-free part: the spec types,
matching, the split of a panel by unit, slugs. Keys no section covers stay reachable through
`charts.keytree.key_tree` (every logged key, nested along its "/" path).

`Panel.keys` are metric names: a key logged by two producers (prime-rl `time/step` of trainer and
orch) is one key here and two labelled series on the chart.
"""
from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from rundash_core.charts.units import unit_of


@dataclass(frozen=True)
class Panel:
    """One chart: a title and the matched keys, in display order; x is "step" or "time"; unit is
    the unit every key shares (`unit_of`), None when unknown or not shared."""

    title: str
    keys: tuple[str, ...]
    x: str = "step"
    unit: str | None = None


@dataclass(frozen=True)
class Section:
    """A collapsible group of panels; `key` is a stable slug for URLs."""

    title: str
    panels: tuple[Panel, ...]
    key: str


class KeyRegex(str):
    """A full-key regex pattern of a panel spec (a plain str pattern is a literal key)."""


@dataclass(frozen=True)
class PanelSpec:
    """One panel of a source's section table: its title and the key patterns it shows, in order.
    split: one panel per value of the (?P<agent>) group (title + " · <role>" for multi-agent roles;
    single-agent envs log the role `agent`).
    rest: only keys that no earlier panel of the list took (catch-all after specific panels)."""

    title: str
    patterns: tuple[str, ...]
    x: str = "step"
    split: bool = False
    rest: bool = False


SectionSpecs = list[tuple[str, list[PanelSpec]]]  # (section title, its panel specs), in display order


def panel(title: str, *patterns: str, **kw) -> PanelSpec:
    """`PanelSpec(title, patterns, ...)` with the patterns as arguments, for compact tables."""
    return PanelSpec(title, patterns, **kw)


def stat_keys(base: str, *stats: str) -> tuple[str, ...]:
    """`base/<stat>` for each stat: the keys of one logged statistic family."""
    return tuple(f"{base}/{s}" for s in stats)


MEAN_MAX_MIN = ("mean", "max", "min")


# units ----------------------------------------------------------------------------------------------
def split_by_unit(panel: Panel) -> list[Panel]:
    """A panel whose keys have two or more known units becomes one panel per unit, titled
    `<title> · <unit>` (keys of unknown unit keep the bare title), in the order of each group's
    first key; otherwise the panel itself, with `unit` set when all its keys share one."""
    units = [unit_of(k) for k in panel.keys]
    known = list(dict.fromkeys(u for u in units if u is not None))
    if len(known) <= 1:
        shared = known[0] if known and None not in units else None
        return [Panel(panel.title, panel.keys, panel.x, shared)]
    groups: dict[str | None, list[str]] = {}
    for key, unit in zip(panel.keys, units):
        groups.setdefault(unit, []).append(key)
    return [Panel(panel.title if unit is None else f"{panel.title} · {unit}", tuple(keys), panel.x, unit)
            for unit, keys in groups.items()]


# matching -------------------------------------------------------------------------------------------
_LITERAL = re.compile(r"(?:[^.^$*+?{}\[\]\\|()]|\\[^A-Za-z0-9])*")


def _literal_prefix(rx: str) -> str:
    """The literal text every match of `rx` starts with (narrows the keys to test by bisect). The
    patterns here have no top-level alternation, which would break this."""
    lit = _LITERAL.match(rx).group()
    chars = re.findall(r"\\.|.", lit, re.S)
    if rx[len(lit):len(lit) + 1] in ("*", "?", "{"):
        chars = chars[:-1]  # the last literal character is optional
    return "".join(c[-1] for c in chars)


@lru_cache(maxsize=4096)
def _compiled(rx: str) -> tuple[re.Pattern, str]:
    return re.compile(rx), _literal_prefix(rx)


def _match(pat: str, keys: tuple[str, ...], keyset: frozenset) -> list[tuple[str, str | None]]:
    """(key, agent) pairs matched by one pattern, in key order."""
    if not isinstance(pat, KeyRegex):
        return [(pat, None)] if pat in keyset else []
    rx, prefix = _compiled(str(pat))
    out = []
    for i in range(bisect_left(keys, prefix), len(keys)):
        k = keys[i]
        if not k.startswith(prefix):
            break
        m = rx.fullmatch(k)
        if m:
            out.append((k, m.groupdict().get("agent")))
    return out


def _slug(title: str, taken: set) -> str:
    base = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-") or "section"
    slug, n = base, 2
    while slug in taken:
        slug, n = f"{base}-{n}", n + 1
    taken.add(slug)
    return slug


def _specs(source, flavor: str, keys, train_envs, eval_envs) -> SectionSpecs:
    table = source.sections
    return table(flavor, keys, train_envs, eval_envs) if callable(table) else table


@lru_cache(maxsize=64)
def _sections(source, flavor: str, keys: tuple[str, ...], train_envs: tuple[str, ...],
              eval_envs: tuple[str, ...]) -> tuple[Section, ...]:
    keyset = frozenset(keys)
    claimed: set[str] = set()
    taken: set[str] = set()
    out = []
    for title, specs in _specs(source, flavor, keys, train_envs, eval_envs):
        panels: list[Panel] = []
        for spec in specs:
            groups: dict[str | None, list[str]] = {}
            for pat in spec.patterns:
                for k, agent in _match(pat, keys, keyset):
                    if spec.rest and k in claimed:
                        continue
                    ks = groups.setdefault(agent if spec.split else None, [])
                    if k not in ks:
                        ks.append(k)
            for agent, ks in groups.items():
                if ks:
                    name = spec.title if agent in (None, "agent") else f"{spec.title} · {agent}"
                    panels += split_by_unit(Panel(name, tuple(ks), spec.x))  # one unit per panel
                    claimed.update(ks)
        if panels:
            out.append(Section(title, tuple(panels), _slug(title, taken)))
    return tuple(out)


def sections_for(kind: str, flavor: str, keys: Iterable[str], *, train_envs: Iterable[str] = (),
                 eval_envs: Iterable[str] = ()) -> list[Section]:
    """The sections of a run kind/flavor that have at least one logged key (cached per key set),
    from the section table its registered `Source` carries (none: no sections); ValueError for a
    kind no source is registered for."""
    from rundash_core import sources  # here, not at the top: the registry imports the sources' tables, which import this

    source = sources.source_for(kind)
    if source is None:
        raise ValueError(f"no chart sections for run kind {kind!r}: no source of that kind is registered")
    if source.sections is None:
        return []
    ks = tuple(sorted({str(k) for k in keys}))
    return list(_sections(source, flavor or "rl", ks, tuple(train_envs), tuple(eval_envs)))


def covered_keys(sections: Iterable[Section]) -> set[str]:
    """Every key some panel of `sections` shows."""
    return {k for s in sections for p in s.panels for k in p.keys}

