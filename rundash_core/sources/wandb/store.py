"""The merged metric rows of a W&B run: `AttemptsTail`'s parts go straight into `MetricStore`'s
blocks (one value matrix per key set and step axis: no row dicts rebuilt), so the merge rules
(the last write of a cell wins, restarts, the tidy view) are the ones every JSON-lines source uses."""
from __future__ import annotations

import itertools
import operator

import numpy as np

from rundash_core.metrics.store import MetricStore
from rundash_core.sources.wandb.log import PRODUCER, Batch


def _number(value) -> float:
    return float(value) if type(value) in (int, float) else np.nan


class WandbStore(MetricStore):
    """The merged metric rows of a W&B run (all attempts): the tail's parts go straight into the
    store's blocks (one value matrix per key set and step axis)."""

    def _ingest(self, parsed: Batch) -> None:
        steps, times = parsed.steps, parsed.times
        parts: dict[bool, list] = {}
        for pos, keys, members in parsed.parts:
            keys = self._admit(keys, 0)
            if not keys:
                continue
            get = operator.itemgetter(*keys) if len(keys) > 1 else (lambda r, k=keys[0]: (r[k],))
            try:
                values = np.fromiter(itertools.chain.from_iterable(map(get, members)), dtype=np.float64,
                                     count=len(members) * len(keys))
            except (TypeError, ValueError):  # a key numeric in the first rows, not in later ones
                values = np.fromiter(map(_number, itertools.chain.from_iterable(map(get, members))),
                                     dtype=np.float64, count=len(members) * len(keys))
            values = values.reshape(len(members), len(keys))
            keyed = steps[pos] >= 0
            for by_step in (True, False):
                sel = keyed == by_step
                if sel.any():
                    parts.setdefault(by_step, []).append((pos[sel], keys, values[sel]))
        if len(times):
            self._note_times(times)
        self.log.reserve(sum(int(v.size) for items in parts.values() for _, _, v in items))
        for by_step, items in parts.items():
            if by_step:
                self._merge_stepped(PRODUCER, items, steps, times)
            else:
                self._append_timed(PRODUCER, items, times)
