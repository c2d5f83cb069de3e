"""A listed sample's two ids, and which one a link carries.

`sample_id` is rundash's short form (`1-d8ba8749`, `train-3-12`); `episode_id` is the id the
writer gave it (prime-rl's episode `id`, Relax's sample index, the Harbor trial name), what a user
pastes from `jq` or a log. `run.episode()` takes either: the short form first, then a writer id that
names exactly one sample. A deep link carries the writer id where it names one sample, so the link
survives a change of the short form; an old short-form link still opens.
"""
from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd

from rundash_core import frames

SHOWN_CANDIDATES = 5  # how many matching samples an ambiguous-id message lists
LINK_CHARS = 128  # a longer writer id (or one a URL would escape) is not put in links: the short form is


def _matches(values: pd.Series, ident: str) -> np.ndarray:
    return np.flatnonzero((values == ident).fillna(False).to_numpy(dtype=bool))


def find(samples: pd.DataFrame, ident: str, run_id: str) -> int:
    """The position in `samples` of the sample `ident` names (its `sample_id`, else its unique
    `episode_id`); KeyError naming the run and the id when none does, or when several share it."""
    ident = str(ident)
    hit = _matches(samples["sample_id"], ident)
    if len(hit):
        return int(hit[0])
    if "episode_id" in samples.columns and ident:
        hit = _matches(samples["episode_id"], ident)
        if len(hit) == 1:
            return int(hit[0])
        if len(hit) > 1:
            names = ", ".join(str(samples["sample_id"].iloc[i]) for i in hit[:SHOWN_CANDIDATES])
            more = f", … {len(hit) - SHOWN_CANDIDATES} more" if len(hit) > SHOWN_CANDIDATES else ""
            raise KeyError(f"{run_id}: {ident!r} is the id of {len(hit)} samples ({names}{more}): "
                           "open one by its sample id")
    raise KeyError(f"{run_id}: no sample {ident!r} (neither a sample id nor an episode id of this run)")


def row(samples: pd.DataFrame, ident: str, run_id: str) -> dict:
    """The row of the sample `ident` names (`find`), missing values as None."""
    return plain(samples.iloc[find(samples, ident, run_id)].to_dict())


def plain(found: dict) -> dict:
    """A frame row as a dict with its missing values (NA, NaN) as None."""
    return {k: (None if v is pd.NA or v is None or (isinstance(v, float) and v != v) else v) for k, v in found.items()}


def positions(samples: pd.DataFrame) -> dict[str, int]:
    """id → position for every `sample_id` and every `episode_id` that names one sample (a writer
    id never hides a sample id): a lookup table for a long listing; a miss goes to `find` for its
    message."""
    out: dict[str, int] = {}
    if "episode_id" in samples.columns:
        eids = samples["episode_id"].tolist()
        once = _named_once(eids)
        out = {e: i for i, e in enumerate(eids) if e in once}
    out.update({str(s): i for i, s in enumerate(samples["sample_id"].tolist())})
    return out


def _named_once(eids: list) -> set[str]:
    """The writer ids (non-empty strings) that occur once."""
    counts = Counter(e for e in eids if type(e) is str and e)
    return {e for e, n in counts.items() if n == 1}


def _linkable(eid: str) -> bool:
    return len(eid) <= LINK_CHARS and frames.is_url_safe(eid)


def link_ids(samples: pd.DataFrame) -> pd.Series:
    """Per row, the id a deep link carries: its `episode_id` when that names only it in `samples`
    (the whole run's listing), is no other row's sample id and is short and URL-safe, else its
    `sample_id`."""
    sids = samples["sample_id"].tolist()
    if "episode_id" not in samples.columns or samples.empty:
        return pd.Series(sids, index=samples.index, dtype=object)
    eids = samples["episode_id"].tolist()
    once = {e for e in _named_once(eids) - set(sids) if _linkable(e)}
    return pd.Series([e if e in once else s for s, e in zip(sids, eids)], index=samples.index, dtype=object)


def link_id(samples: pd.DataFrame, sample_id: str) -> str:
    """`link_ids` for one listed sample (its `sample_id` when it is not listed)."""
    hit = _matches(samples["sample_id"], sample_id)
    if not len(hit) or "episode_id" not in samples.columns:
        return sample_id
    eid = samples["episode_id"].iloc[hit[0]]
    if type(eid) is not str or not eid or not _linkable(eid):
        return sample_id
    unique = len(_matches(samples["episode_id"], eid)) == 1 and not len(_matches(samples["sample_id"], eid))
    return str(eid) if unique else sample_id
