"""User-typed patterns (metric filter, run-name match, Overview and Config search) run on RE2: they
match like `re` for ordinary patterns and cannot freeze the shared server on pathological ones."""
from __future__ import annotations

import re
import time

import pytest

from rundash_core.safety.user_regex import MAX_INPUT_CHARS, MAX_PATTERN_CHARS, NOTHING, compile_user_pattern, filter_names
from rundash_core.views.config_search import compile_search, search_config


def best_time(fn, reps: int = 20, rounds: int = 3) -> float:
    """Best of `rounds` timings of `reps` calls (the machine is shared: take the least disturbed)."""
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(reps):
            fn()
        times.append(time.perf_counter() - start)
    return min(times)


def compiled(text, **kw):
    pattern, err = compile_user_pattern(text, **kw)
    assert err is None, err
    return pattern


# catastrophic backtracking ------------------------------------------------------------------------
# Each pathological pattern is timed against a harmless pattern of the same meaning on the same
# input; with a backtracking engine the first takes exponential time (`(a+)+$` on 30 characters
# already takes minutes with `re`), here both are linear scans of the same text.
@pytest.mark.parametrize("evil, tame, text", [
    ("(.*)*X", ".*X", "a" * 10_000),
    ("(a+)+$", "a+$", "a" * 10_000 + "!"),
    ("(a|aa)+b", "a+b", "a" * 10_000 + "c"),
    ("(x+x+)+y", "x+y", "x" * 10_000),
    ("(.*a){12}", ".*a", "a" * 10_000 + "b"),
])
def test_pathological_patterns_return_promptly(evil, tame, text):
    evil_rx, tame_rx = compiled(evil), compiled(tame)
    assert evil_rx.search(text) == tame_rx.search(text)
    baseline = best_time(lambda: tame_rx.search(text))
    assert best_time(lambda: evil_rx.search(text)) <= 20 * baseline + 0.002
    # linear: ten times the text, about ten times the time (a quadratic engine would be ~100x)
    long_text = text * 10
    assert best_time(lambda: evil_rx.search(long_text), reps=5) <= 30 * best_time(lambda: evil_rx.search(text), reps=5) + 0.002


def test_pathological_filters_over_many_names_return_promptly():
    names = [f"train/reward_{i}/" + "a" * 200 for i in range(2_000)]
    baseline = best_time(lambda: filter_names(names, "reward"), reps=2)
    for evil in ("(.*)*X", "(a+)+$", "(a|aa)+b"):
        kept, err = filter_names(names, evil)
        assert err is None and kept == ([] if evil != "(a+)+$" else names)
        assert best_time(lambda: filter_names(names, evil), reps=2) <= 20 * baseline + 0.005


def test_config_search_with_pathological_pattern():
    cfg = {"model": {"name": "a" * 5000}, "cmd": "a" * 5000}
    pattern, err = compile_search("(a|aa)+b")
    assert err is None
    assert search_config(cfg, pattern)[2] == 0
    assert search_config("a" * 20_000 + "\n" + "ab\n", pattern)[:3:2] == ("ab", 1)


# same answers as `re` -----------------------------------------------------------------------------
CASES = [  # (pattern, text): compared with re.search(pattern, text, re.IGNORECASE)
    ("reward", "train/reward/mean"), ("REWARD", "train/reward/mean"), ("reward", "train/Reward/mean"),
    ("^train/", "train/loss"), ("^train/", "eval/train/loss"), ("loss$", "train/loss"), ("loss$", "train/loss/max"),
    (r"\bkl\b", "train/kl"), (r"\bkl\b", "train/klx"), (r"[0-9]+", "step_12"), (r"\d", "nodigit"),
    (r"\w+/mean$", "reward/mean"), (r"[^/]+/[^/]+$", "a/b"), (r"[^/]+/[^/]+$", "a/b/c/"),
    ("reward|entropy", "policy/entropy"), ("reward|entropy", "loss"), ("(?:math|gsm8k)-", "gsm8k-qwen"),
    (r"a{2,3}", "caab"), (r"a{2,3}", "cab"), (r"pass@1\b", "eval/pass@1"), (r"qwen3-0\.6b", "qwen3-0x6b"),
    (r"qwen3-0\.6b", "reverse-text--qwen3-0.6b--a7be3ee1"), ("a.c", "a\nc"), ("é", "CAFÉ"), (r"mean\Z", "x/mean"),
    (r"mean\Z", "x/mean/std"), ("", "anything"), ("(a)(b)?", "xa"), (r"(?P<n>ab)+", "abab"),
]


@pytest.mark.parametrize("pattern, text", CASES)
def test_ordinary_patterns_match_like_re(pattern, text):
    expected = bool(re.search(pattern, text, re.IGNORECASE))
    if pattern == "":
        assert compile_user_pattern(pattern) == (None, None)  # empty: no filter
        return
    assert compiled(pattern).search(text) is expected
    assert compiled(pattern, ignore_case=False).search(text) is bool(re.search(pattern, text))


@pytest.mark.parametrize("pattern, text", [("a", "a b A"), ("o", "foo/bOo"), (r"\d+", "1 22 333"), ("x*", "abc")])
def test_count_like_findall(pattern, text):
    assert compiled(pattern).count(text) == len(re.findall(pattern, text, re.IGNORECASE))


def test_matcher_api_and_non_strings():
    rx = compiled("12")
    assert rx.pattern == "12" and rx.search(3120) and not rx.search(None)
    assert compiled("x").search("\ud800x")  # a lone surrogate (undecodable file name) does not raise
    assert compiled("z").search("a" * MAX_INPUT_CHARS + "z") is False  # one search looks at a bounded prefix
    assert not any(NOTHING.search(s) for s in ("", "a", "\n", "é", "\U0010ffff"))


# errors -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("pattern, says", [
    ("(", "missing )"), ("model[", "missing ]"), ("[z-a]", "invalid character class range"), ("a**", "bad repetition"),
    ("(?=x)y", "look-around"), ("(?<!x)y", "look-around"), (r"(a)\1", "back-references"), ("a{1001}", "repetition"),
])
def test_invalid_patterns_give_a_message(pattern, says):
    rx, err = compile_user_pattern(pattern)
    assert rx is None and err.startswith("invalid regex") and says in err


def test_over_long_patterns_are_refused():
    rx, err = compile_user_pattern("a" * (MAX_PATTERN_CHARS + 1))
    assert rx is None and "too long" in err and str(MAX_PATTERN_CHARS) in err
    assert compile_user_pattern("a" * MAX_PATTERN_CHARS)[1] is None


def test_filter_names():
    names = ["train/reward/mean", "train/Entropy", "eval/gsm8k/avg@8", "perf/throughput"]
    assert filter_names(names, "reward|entropy") == (["train/reward/mean", "train/Entropy"], None)
    assert filter_names(names, "^eval/") == (["eval/gsm8k/avg@8"], None)
    assert filter_names(names, "Entropy", ignore_case=False) == (["train/Entropy"], None)
    assert filter_names(names, "") == (names, None)
    kept, err = filter_names(names, "(")
    assert kept == names and err.startswith("invalid regex")
    assert filter_names((n for n in names), "perf")[0] == ["perf/throughput"]
