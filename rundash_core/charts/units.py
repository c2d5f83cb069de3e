"""The unit of a metric, read from its key name: one panel never mixes units (seconds and token
counts on one axis), so sections split panels by it and axes are titled with it."""
from __future__ import annotations

import re

SECONDS, MS_PER_TOKEN, S_PER_TOKEN, PER_SECOND = "seconds", "ms per token", "s per token", "per second"
TOKENS, COUNT, RATIO, GB, GIB = "tokens", "count", "ratio", "GB", "GiB"
_PARTS = re.compile(r"[/_\-:@().\s]+")
_PER_SECOND = re.compile(r"throughput|:rate|tokens/sec|per_s(?:ec(?:ond)?)?(?:$|[/_])|/s(?:$|/)|(?:^|[/_])[tq]ps(?:$|/)")
_RATIO_WORDS = {"ratio", "frac", "fraction", "clipfrac", "perc", "pct", "percent", "rate", "is", "has", "mfu"}
_COUNT_WORDS = {"count", "counts", "samples", "inflight", "preempted"}
_TIME_WORDS = {"time", "timing", "latency", "duration", "wait", "s", "sec", "secs", "seconds"}


def unit_of(key: str) -> str | None:
    """The unit of a metric, read from its key's words (None when the words do not say). In this
    order, so the most specific word wins: rates (`throughput`, `…:rate`, `tokens/sec`) are per
    second; `timing_per_token_ms/…` ms per token (`timing_per_token/…` s per token); ratios and
    fractions (`…ratio`, `…frac…`, `…perc`, `…rate`, `is_…`/`has_…` means, MFU); `…_gb` GB
    (`…_gib` GiB); token amounts (`…tokens`, `num_tokens`, lengths, `seqlen`; not `chi2_token`, a
    per-token statistic) tokens; counts (`num_…`, `…count…`, samples); then times (`timing_s/…`,
    `timing/…`, `time/…`, `…_time`, `…/timing/…`, `latency`, `(s)`) seconds. So
    `timing_s/agent_loop/proxy_total_prompt_tokens/max` is tokens, not seconds."""
    k = key.lower()
    parts = [p for p in _PARTS.split(k) if p]
    words = set(parts)
    if _PER_SECOND.search(k):
        return PER_SECOND
    if "per_token_ms" in k:
        return MS_PER_TOKEN
    if "per_token" in k:
        return S_PER_TOKEN
    if words & _RATIO_WORDS or any(p.endswith(("ratio", "frac", "fraction")) or p.startswith("mfu") for p in parts):
        return RATIO
    if words & {"gb", "gib"}:
        return GB if "gb" in words else GIB
    if any(p.endswith("tokens") for p in parts) or words & {"seqlen", "length", "len"}:
        return TOKENS
    if words & _COUNT_WORDS or any(p.startswith("num") for p in parts):
        return COUNT
    if k.startswith(("timing_s/", "timing/", "time/")) or words & _TIME_WORDS:
        return SECONDS
    return None
