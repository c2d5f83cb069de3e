"""The process-wide LRU cache: bounded by bytes, least recently used out first."""
from __future__ import annotations

import json
import os

import numpy as np

import rundash_core as rd
from rundash_core import cache
from rundash_core.cache import LRUCache
from rundash_core.io.configs import load_config_file

from helpers import NEW_METRICS, make_rl_run


def arr(nbytes: int) -> np.ndarray:
    return np.zeros(nbytes, dtype=np.uint8)


def test_evicts_least_recently_used_by_bytes():
    c = LRUCache(limit_bytes=1000)
    made = []

    def make(key, n):
        made.append(key)
        return arr(n)

    a = c.get_or_create("a", lambda: make("a", 400))
    c.get_or_create("b", lambda: make("b", 400))
    assert c.get_or_create("a", lambda: make("a", 400)) is a  # hit: no new value, `a` is now newest
    assert made == ["a", "b"] and (c.hits, c.misses) == (1, 2)
    c.get_or_create("c", lambda: make("c", 400))  # 1200 > 1000: the least recently used goes
    assert "b" not in c and "a" in c and "c" in c
    assert c.total_bytes == 800
    c.get_or_create("d", lambda: make("d", 100))
    assert {k for k in "abcd" if k in c} == {"a", "c", "d"}  # 900 fits
    c.get_or_create("e", lambda: make("e", 700))  # 1600: a, then c go (oldest first)
    assert {k for k in "abcde" if k in c} == {"d", "e"}
    assert c.total_bytes <= 1000


def test_an_entry_larger_than_the_limit_is_not_kept():
    """The limit holds: an entry larger than it is handed out but not kept (built again when asked
    for: a small limit makes loads slower, not memory larger)."""
    c = LRUCache(limit_bytes=100)
    c.get_or_create("small", lambda: arr(50))
    big = c.get_or_create("big", lambda: arr(500))
    assert len(big) == 500 and len(c) == 0 and c.total_bytes <= 100
    assert len(c.get_or_create("big", lambda: arr(1))) == 1  # built again


def test_one_build_per_key_at_a_time():
    """Sessions asking for the same file while it is parsed wait for that parse."""
    import threading
    import time

    c = LRUCache(limit_bytes=1 << 20)
    builds = []

    def slow():
        builds.append(1)
        time.sleep(0.2)
        return arr(10)

    got = []
    threads = [threading.Thread(target=lambda: got.append(c.get_or_create("k", slow))) for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(builds) == 1 and len(got) == 5 and all(g is got[0] for g in got)


def test_growing_entries_are_measured_at_eviction():
    class Growing:
        def __init__(self):
            self.nbytes = 10

    c = LRUCache(limit_bytes=1000)
    g = c.get_or_create("g", Growing)
    c.get_or_create("x", lambda: arr(10))
    g.nbytes = 995  # the followed file grew
    c.get_or_create("y", lambda: arr(10))  # g is the least recently used and now too big
    assert "g" not in c and "x" in c and "y" in c


def test_discard_and_clear():
    c = LRUCache(limit_bytes=10_000)
    c.get_or_create(1, lambda: arr(10))
    c.get_or_create(2, lambda: arr(10))
    c.discard(1)
    c.discard("absent")
    assert (1 in c, 2 in c, len(c)) == (False, True, 1)
    c.clear()
    assert len(c) == 0 and c.total_bytes == 0


def test_config_entries_count_their_content(tmp_path, monkeypatch):
    """A parsed config is sized by what it holds, so big configs are bounded like anything else."""
    monkeypatch.setattr(cache.shared, "limit", 600_000)
    paths = []
    for i in range(3):
        p = tmp_path / f"big{i}.json"
        p.write_text(json.dumps({f"key{j}": "x" * 100 for j in range(2000)}))  # ~220 KB each
        paths.append(p)
    for p in paths:
        assert len(load_config_file(str(p)).value) == 2000
    assert len(cache.shared) <= 2 and cache.shared.total_bytes <= 600_000  # the most recent ones that fit
    assert cache.shared.total_bytes >= 200_000
    assert any(key[1].endswith("big2.json") for key in list(cache.shared._items))


def test_metric_store_shared_and_evicted(tmp_path, monkeypatch):
    runs = []
    for i in range(3):
        rows = [{"step": s, "time": float(s), **{f"perf/k{k}": float(k) for k in range(50)}, "producer": "trainer"}
                for s in range(200)]
        runs.append(make_rl_run(tmp_path, f"e--m--0000000{i}", rows=rows))
    first = rd.open_run(runs[0]).store()
    assert rd.open_run(runs[0]).store() is first  # two Run objects share one store
    monkeypatch.setattr(cache.shared, "limit", int(first.nbytes * 1.5))
    rd.open_run(runs[1]).metrics()
    rd.open_run(runs[2]).metrics()
    assert cache.shared.total_bytes <= cache.shared.limit or len(cache.shared) == 1
    keys = [k for k in list(cache.shared._items) if k[0] == "metrics"]
    assert keys == [("metrics", str((runs[2] / NEW_METRICS).resolve()))]
    # an evicted run reads again, with the same result
    again = rd.open_run(runs[0]).metrics()
    assert len(again) == 200 * 50


def test_limit_from_env(monkeypatch):
    monkeypatch.setenv("RUNDASH_CACHE_BYTES", "12345")
    assert cache._limit_from_env() == 12345
    monkeypatch.setenv("RUNDASH_CACHE_BYTES", "1e6")
    assert cache._limit_from_env() == 1_000_000
    monkeypatch.setenv("RUNDASH_CACHE_BYTES", "lots")
    assert cache._limit_from_env() == cache.DEFAULT_LIMIT


def test_a_given_size_or_cache_size_skips_the_deep_walk(monkeypatch):
    c = LRUCache(limit_bytes=1000)

    class Sized:
        cache_size = 300

    def no_walk(*a, **k):
        raise AssertionError("deep walk")

    monkeypatch.setattr(cache, "_deep_size", no_walk)
    c.get_or_create("s", Sized)
    c.get_or_create("t", lambda: ("x", {"y": 1}), size=500)
    assert c.total_bytes == 800
    c.get_or_create("u", lambda: ("z",), size=400)  # 1200: the oldest ("s") goes
    assert "s" not in c and c.total_bytes == 900


def test_discovery_entry_estimates_track_the_deep_size():
    import glob

    from rundash_core.sources.verl.overview import overview_inputs, overview_inputs_size

    logs = sorted(glob.glob("tests/data/verl/**/*.log", recursive=True))
    assert logs
    for log in logs:
        d = overview_inputs(log)
        if d is None:
            continue
        fid = os.stat(log)
        fp = cache.shared._items[("verl-overview-inputs", fid.st_dev, fid.st_ino)][0]
        real = cache._deep_size((fp, d))
        assert 0.67 * real <= overview_inputs_size(d) <= 1.5 * real


def test_current_rebuilds_only_when_the_stamp_changes():
    c = LRUCache(1 << 20)
    builds = []

    def build(v):
        builds.append(v)
        return v

    assert c.current("k", ("a", 1), lambda: build("first")) == "first"
    assert c.current("k", ("a", 1), lambda: build("again")) == "first"  # same stamp: kept
    assert c.current("k", ("a", 2), lambda: build("second")) == "second"  # new stamp: rebuilt
    assert builds == ["first", "second"] and len(c) == 1
    assert c.current("gone", 1, lambda: None) is None and "gone" not in c  # nothing readable: not kept
    assert c.peek("k") == (("a", 2), "second") and c.peek("missing", 7) == 7 and "missing" not in c


def test_a_small_limit_costs_loads_not_memory(tmp_path, monkeypatch):
    """Two runs whose metric stores are each larger than the limit: every load parses again, and
    the process's resident memory stays where the first loads left it (no climb per load)."""
    import gc

    import rundash_core as rd
    from benchmarks import metrics_data as md

    def rss_mb() -> float:
        with open("/proc/self/status") as fh:
            return next(int(line.split()[1]) for line in fh if line.startswith("VmRSS")) / 1024

    runs = [md.generate_run(str(tmp_path / f"r{i}"), md.Spec(steps=600, keys=200)) for i in range(2)]
    paths = [os.path.dirname(os.path.dirname(os.path.dirname(g.path))) for g in runs]
    monkeypatch.setattr(cache.shared, "limit", 1 << 20)  # far below one store
    seen = []
    for _ in range(6):
        for p in paths:
            assert len(rd.open_run(p).metrics())
        gc.collect()
        seen.append(rss_mb())
        assert len(cache.shared) == 0 or cache.shared.total_bytes <= cache.shared.limit
    assert max(seen[2:]) <= seen[1] + 20, seen  # flat after warm-up, within allocator noise
