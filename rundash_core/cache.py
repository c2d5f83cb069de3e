"""One process-wide cache shared by every session and notebook call.

Entries are parsed file state (metric stores, parsed config files) keyed by the file's path and
identity; an entry that keeps following its file (a `MetricStore`) reports its current size, so
the bound holds as runs grow. Least-recently-used entries are evicted past the byte limit
(`RUNDASH_CACHE_BYTES`, default 2 GiB).
"""
from __future__ import annotations

import dataclasses
import os
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

DEFAULT_LIMIT = 2 << 30


def _sizeof(value: Any) -> int:
    n = getattr(value, "cache_size", None)  # a small fixed value that knows its size (no deep walk)
    if isinstance(n, int) and not isinstance(n, bool):
        return n
    n = getattr(value, "nbytes", None)
    if isinstance(n, int):
        return n
    if hasattr(value, "memory_usage"):
        return int(value.memory_usage(index=True, deep=True).sum())
    return _deep_size(value)


def _grows(value: Any) -> bool:
    """Entries that follow their file report a live `nbytes`; the rest are sized once."""
    return isinstance(getattr(value, "nbytes", None), int)


def _deep_size(obj: Any, depth: int = 0) -> int:
    size = sys.getsizeof(obj)
    if depth > 20:
        return size
    if isinstance(obj, dict):
        size += sum(_deep_size(k, depth + 1) + _deep_size(v, depth + 1) for k, v in obj.items())
    elif isinstance(obj, (list, tuple)):
        size += sum(_deep_size(v, depth + 1) for v in obj)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):  # e.g. a parsed ConfigFile
        size += sum(_deep_size(getattr(obj, f.name), depth + 1) for f in dataclasses.fields(obj))
    return size


class LRUCache:
    """A thread-safe LRU map bounded by the total byte size of its values."""

    def __init__(self, limit_bytes: int = DEFAULT_LIMIT):
        self.limit = limit_bytes
        self._items: OrderedDict[Any, Any] = OrderedDict()
        self._fixed_sizes: dict[Any, int] = {}  # sizes of entries that never change, measured once
        self._fixed_total = 0
        self._growing: set = set()  # keys of entries that report a live `nbytes`
        self._lock = threading.RLock()
        self.hits = 0
        self.misses = 0
        self._building: dict[Any, tuple[threading.Event, int]] = {}  # keys being built: (done, builder thread)

    def get_or_create(self, key: Any, factory: Callable[[], Any], size: int | None = None) -> Any:
        """The cached value for `key`, else `factory()` stored. `size` (bytes), when given, is the
        size of a fixed value the caller already knows (e.g. estimated from the bytes it came
        from), so it is not measured by a deep walk; a value with an int `cache_size` attribute
        is sized by it likewise. One build per key at a time: sessions asking for the same file
        while it is parsed wait for that parse instead of each holding its own."""
        while True:
            with self._lock:
                if key in self._items:
                    self._items.move_to_end(key)
                    self.hits += 1
                    return self._items[key]
                building = self._building.get(key)
                own = building is None
                if own:
                    self._building[key] = (threading.Event(), threading.get_ident())
                if own or building[1] == threading.get_ident():  # (or a build asking for its own key)
                    self.misses += 1
                    break
            building[0].wait()  # then it is there, unless it was too large to keep: build it here
        try:
            value = factory()
        except BaseException:
            if own:
                with self._lock:
                    self._building.pop(key)[0].set()
            raise
        with self._lock:
            if own:  # stored and announced under one lock: a waiter finds the value
                self._building.pop(key)[0].set()
            if key not in self._items:
                self._items[key] = value
                if _grows(value):
                    self._growing.add(key)
                else:
                    self._fixed_sizes[key] = int(size) if size is not None else _sizeof(value)
                    self._fixed_total += self._fixed_sizes[key]
            value = self._items[key]
            self._items.move_to_end(key)
            self.evict()
            return value

    def peek(self, key: Any, default: Any = None) -> Any:
        """The cached value for `key` (counted as a use), or `default`; never creates one."""
        with self._lock:
            if key not in self._items:
                return default
            self._items.move_to_end(key)
            self.hits += 1
            return self._items[key]

    def current(self, key: Any, stamp: Any, build: Callable[[], Any],
                size: Callable[[Any], int] | None = None) -> Any:
        """The value built for `stamp` (e.g. the fingerprints of the files it was read from); when
        the stamp changed it is built again and stored with the new stamp. A build that returns
        None (nothing readable) is not stored. `size(value)` sizes it without a deep walk."""
        have = self.peek(key)
        if have is not None and have[0] == stamp:
            return have[1]
        value = build()
        with self._lock:
            self._forget(key)
        if value is None:
            return None
        return self.get_or_create(key, lambda: (stamp, value), size=None if size is None else size(value))[1]

    def _total(self) -> int:
        """Cost: one `nbytes` read per growing entry (metric stores), not per entry."""
        return self._fixed_total + sum(_sizeof(self._items[k]) for k in self._growing)

    def evict(self) -> None:
        """Drop least-recently-used entries until the total size is within the limit, the newest
        too when it alone is larger (then it is parsed again when asked for: a small limit makes
        loads slower, not memory larger). Entries that grow call this after growing."""
        with self._lock:
            total = self._total()
            while total > self.limit and self._items:
                key, value = next(iter(self._items.items()))
                total -= self._fixed_sizes.get(key) if key in self._fixed_sizes else _sizeof(value)
                self._forget(key)

    def _forget(self, key: Any) -> None:
        self._items.pop(key, None)
        self._fixed_total -= self._fixed_sizes.pop(key, 0)
        self._growing.discard(key)

    def discard(self, key: Any) -> None:
        with self._lock:
            self._forget(key)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._fixed_sizes.clear()
            self._fixed_total = 0
            self._growing.clear()

    def stats(self) -> dict[str, int | float | None]:
        """Live numbers for the Settings page: entries, bytes held, the byte limit, hits, misses
        and the hit rate (None before the first lookup)."""
        with self._lock:
            asked = self.hits + self.misses
            return {"entries": len(self._items), "bytes": self._total(), "limit": self.limit, "hits": self.hits,
                    "misses": self.misses, "hit_rate": self.hits / asked if asked else None}

    @property
    def total_bytes(self) -> int:
        with self._lock:
            return self._total()

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: Any) -> bool:
        return key in self._items


def _limit_from_env() -> int:
    raw = os.environ.get("RUNDASH_CACHE_BYTES", "")
    try:
        return int(float(raw)) if raw else DEFAULT_LIMIT
    except ValueError:
        return DEFAULT_LIMIT


shared = LRUCache(_limit_from_env())
