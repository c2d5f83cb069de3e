"""The registry of sources: every kind of run rundash reads, each with all it knows of its kind.

A `Source` carries what one kind's folder (`rundash_core/sources/<kind>/`) knows: its `Run`
subclass; how it finds its runs (whether a path, a directory or a file such as a verl console log,
is one of its runs: `detect`; which runs sit directly among a folder's entries: `find`); its chart
sections; which of its keys stand for each canonical alias (Compare) and health concept; its demo
writer. Charts, Compare and health ask the registry (`source_for`), never branch on a kind, so a
source registered from outside the package (`register`) is discovered, charted, compared and
health-checked like the built-in ones.

Sources are tried in order, most specific first; the first that claims a path owns it. How a run is
summarised (the runs-list row, the run card) is its `Run.overview()`: discovery uses nothing else.
"""
from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from rundash_core.charts.aliases import KeyCandidate
from rundash_core.charts.sections import SectionSpecs
from rundash_core.io.files import OUTSIDE_ROOTS, allowed_roots, inside_roots, listed_path
from rundash_core.run import Run, RunError
from rundash_core.sources.prime_rl import aliases as prime_rl_aliases
from rundash_core.sources.prime_rl import layout as prime_rl_layout
from rundash_core.sources.prime_rl import run as prime_rl_run
from rundash_core.sources.prime_rl import sections as prime_rl_sections
from rundash_core.sources.relax import aliases as relax_aliases
from rundash_core.sources.relax import run as relax_run
from rundash_core.sources.relax import sections as relax_sections
from rundash_core.sources.swe_lego_rl import run as swe_lego_rl_run
from rundash_core.sources.tensorboard import run as tensorboard_run
from rundash_core.sources.tracker_keys import aliases as tracker_aliases
from rundash_core.sources.tracker_keys import sections as tracker_sections
from rundash_core.sources.verl import aliases as verl_aliases
from rundash_core.sources.verl import run as verl_run
from rundash_core.sources.verl import sections as verl_sections
from rundash_core.sources.wandb import run as wandb_run

# A section table, or a function of (flavor, keys, train_envs, eval_envs) returning one (the
# sections of some kinds depend on the run: one per eval env, one per validation data source).
Sections = SectionSpecs | Callable[[str, tuple[str, ...], tuple[str, ...], tuple[str, ...]], SectionSpecs]
Candidates = Mapping[str, tuple[KeyCandidate, ...]]  # a canonical name -> this kind's keys for it, in order


@dataclass(frozen=True, eq=False)  # eq=False: hashed by identity, so a charts cache keyed on it is per registration
class Source:
    """One kind of run: how to find and open its runs, and the tables charts, Compare and health
    read for it (empty ones are fine: its runs then list and open, with only the all-metrics view)."""

    kind: str
    run_class: type[Run]
    detect: Callable[[str], bool]  # is this path a run of this kind?
    find: Callable[[list[os.DirEntry]], list[str]] | None = None  # runs among a folder's entries
    describe: str = ""  # what a run of this kind looks like, for error messages
    sections: Sections | None = None  # its chart sections (`charts.sections`)
    aliases: Candidates = field(default_factory=dict)  # per canonical alias (`charts.aliases.ALIASES`)
    concepts: Candidates = field(default_factory=dict)  # per health concept (`health.checks.CONCEPTS`)
    demo: Callable | None = None  # writes a demo run of this kind


def child_dirs(detect: Callable[[str], bool]) -> Callable[[list[os.DirEntry]], list[str]]:
    """`find` for directory-shaped runs: the non-hidden child directories that are runs."""
    def find(entries: list[os.DirEntry]) -> list[str]:
        out = []
        for e in entries:
            try:
                if not e.name.startswith(".") and e.is_dir() and detect(e.path):
                    out.append(e.path)
            except OSError:
                continue
        return out
    return find


def _demo_writer(module: str, name: str) -> Callable:
    """The demo writer `module.name`, imported when first called: the writers pull in the demo
    story (`rundash_core.demo`), which opening a run never needs."""
    def call(*args, **kwargs):
        return getattr(importlib.import_module(module), name)(*args, **kwargs)
    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"`{module}.{name}` (imported on first call)."
    return call


SOURCES: list[Source] = []  # in the order they are tried: most specific first
_KINDS: list[str] = []  # in the order registered: `kinds()`


def register(source: Source, *, before: str | None = None) -> None:
    """Add a source (tried before the kind `before` when given: more specific kinds come first)."""
    if source.kind in _KINDS:
        raise ValueError(f"run kind {source.kind!r} is already registered")
    at = next((i for i, s in enumerate(SOURCES) if s.kind == before), len(SOURCES))
    SOURCES.insert(at, source)
    _KINDS.append(source.kind)


def unregister(kind: str) -> None:
    """Remove the source of `kind` (a test that registered one undoes it so)."""
    SOURCES[:] = [s for s in SOURCES if s.kind != kind]
    _KINDS.remove(kind)


def kinds() -> tuple[str, ...]:
    """The registered kinds, in the order they were registered (`rd.KINDS`)."""
    return tuple(_KINDS)


def source_for(kind: str) -> Source | None:
    """The registered source of a kind, or None."""
    return next((s for s in SOURCES if s.kind == kind), None)


def __getattr__(name: str):
    if name == "KINDS":  # computed, so a source registered later is listed too
        return kinds()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


register(Source("prime-rl", prime_rl_run.PrimeRLRun, prime_rl_layout.is_run_dir, child_dirs(prime_rl_layout.is_run_dir),
                "prime-rl runs hold configs/, logs/, monitors/ or traces.jsonl", sections=prime_rl_sections.sections,
                aliases=prime_rl_aliases.ALIASES, concepts=prime_rl_aliases.CONCEPTS,
                demo=_demo_writer("rundash_core.sources.prime_rl.demo_run", "write_rl_run")))
register(Source("verl", verl_run.VerlRun, verl_run.is_run_file, verl_run.find_runs,
                "verl runs are console logs (*.log, *.out) or file-logger JSONL ({\"step\": N, \"data\": {…}})",
                sections=verl_sections.sections, aliases=verl_aliases.ALIASES, concepts=verl_aliases.CONCEPTS,
                demo=_demo_writer("rundash_core.sources.verl.demo_run", "write_verl_run")))
register(Source("swe-lego-rl", swe_lego_rl_run.SweLegoRLRun, swe_lego_rl_run.is_run_file, swe_lego_rl_run.find_runs,
                "SWE-Lego-RL runs are verl console logs with harbor_trials/<project>/<exp>/step_N trial dirs",
                # its metrics are a verl console log's: verl's sections, aliases and concepts
                sections=verl_sections.sections, aliases=verl_aliases.ALIASES, concepts=verl_aliases.CONCEPTS,
                demo=_demo_writer("rundash_core.sources.swe_lego_rl.demo_run", "write_lego_run")),
         before="verl")  # its logs are verl logs too: it claims the ones with trial dirs first
register(Source("relax", relax_run.RelaxRun, relax_run.is_run_dir, child_dirs(relax_run.is_run_dir),
                "Relax runs hold rollout_result/{train,eval}/<step>.jsonl", sections=relax_sections.SECTIONS,
                aliases=relax_aliases.ALIASES, concepts=relax_aliases.CONCEPTS,
                demo=_demo_writer("rundash_core.sources.relax.demo_run", "write_relax_run")),
         before="prime-rl")  # a Relax <save> may also hold logs/, which a prime-rl run dir does
register(Source("tensorboard", tensorboard_run.TensorBoardRun, tensorboard_run.is_run_dir, child_dirs(tensorboard_run.is_run_dir),
                "TensorBoard runs are folders holding events.out.tfevents.* files", sections=tracker_sections.sections,
                aliases=tracker_aliases.ALIASES, concepts=tracker_aliases.CONCEPTS,
                demo=_demo_writer("rundash_core.sources.tensorboard.demo_run", "write_tensorboard_run")))
register(Source("wandb", wandb_run.WandbRun, wandb_run.is_run_dir, wandb_run.find_runs,
                "W&B runs are wandb/run-* or wandb/offline-run-* folders holding run-<id>.wandb",
                sections=tracker_sections.sections, aliases=tracker_aliases.ALIASES, concepts=tracker_aliases.CONCEPTS,
                demo=_demo_writer("rundash_core.sources.wandb.demo_run", "write_wandb_run")),
         before="prime-rl")  # an online run's folder holds logs/, which a prime-rl run dir does too


def detect(path: str) -> type[Run] | None:
    """The Run class that can read `path` (a directory or a file), or None."""
    for source in SOURCES:
        try:
            if source.detect(path):
                return source.run_class
        except OSError:
            continue
    return None


def runs_among(entries: list[os.DirEntry]) -> dict[str, type[Run]]:
    """The runs among a folder's entries, by path (the first source that claims one owns it)."""
    found: dict[str, type[Run]] = {}
    for source in SOURCES:
        if source.find is None:
            continue
        for path in source.find(entries):
            found.setdefault(path, source.run_class)
    return found


def open_run(path: str | os.PathLike, run_id: str | None = None, *, reveal: bool = False) -> Run:
    """Open a run (directory or file) of any supported kind; RunError says why when it is not.
    Its readers hide secrets (`rundash_core.safety.gate`); `reveal=True`: raw values, for a notebook."""
    path = listed_path(os.path.abspath(os.fspath(path)))  # a non-UTF-8 name as the listing shows it
    if not os.path.lexists(path):
        raise RunError(f"{path}: no such file or directory")
    if not inside_roots(path):
        raise RunError(f"{path}: {OUTSIDE_ROOTS} ({', '.join(allowed_roots() or ())})")
    cls = detect(path)
    if cls is None:
        kinds = "; ".join(s.describe for s in SOURCES if s.describe)
        what = "directory" if os.path.isdir(path) else "file"
        raise RunError(f"{path}: not a run {what} of a supported kind ({kinds})")
    run = cls(path, run_id=run_id)
    run.reveal = reveal
    return run
