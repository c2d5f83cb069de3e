"""Chart sections per run kind and flavor, and the key tree of the all-metrics mode.

Section lists are tables of panel patterns (literal keys and full-key regexes) matched against the
keys a run actually logged: panels without a match and sections without a panel are dropped, so one
table serves every era of a format. prime-rl follows its W&B "overview" (prime-rl.md 8.3) in order;
verl and SWE-Lego-RL share the verl key catalog (verl.md 8.1-8.2, 9); Relax uses the metrics
`sources/relax.py` derives from its rollout files. Keys no section covers stay reachable through
`key_tree` (every logged key, nested along its "/" path).

`Panel.keys` are metric names: a key logged by two producers (prime-rl `time/step` of trainer and
orch) is one key here and two labelled series on the chart.
"""
from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable

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


class Rx(str):
    """A full-key regex pattern (a plain str pattern is a literal key)."""


@dataclass(frozen=True)
class _P:
    """Panel spec. split: one panel per value of the (?P<agent>) group (title + " · <role>" for
    multi-agent roles; single-agent envs log the role `agent`).
    rest: only keys that no earlier panel of the list took (catch-all after specific panels)."""

    title: str
    pats: tuple[str, ...]
    x: str = "step"
    split: bool = False
    rest: bool = False


def _p(title: str, *pats: str, **kw) -> _P:
    return _P(title, pats, **kw)


def _stats(base: str, *stats: str) -> tuple[str, ...]:
    return tuple(f"{base}/{s}" for s in stats)


MMM = ("mean", "max", "min")

# prime-rl (spec 8.3) ------------------------------------------------------------------------------
COMMON_METRICS = ("effective/num_total_tokens/mean", "effective/num_turns/mean", "effective/num_branches/mean")
COMMON_REGEXES = ("all/[^/]+/has_error/mean", "effective/[^/]+/is_truncated/mean",
                  # "some versions add" is_timeout, under effective or all: both, when present
                  "effective/[^/]+/is_timeout/mean", "all/[^/]+/is_timeout/mean")


def _prime_train(scope: str) -> list[_P]:
    e = re.escape(scope)
    return [_p("reward · effective", Rx(f"{e}/effective/(?P<agent>[^/]+)/reward/mean"), split=True),
            _p("reward · all", Rx(f"{e}/all/(?P<agent>[^/]+)/reward/mean"), split=True),
            *(_p(m, f"{scope}/{m}") for m in COMMON_METRICS),
            *(_p(r.replace("[^/]+", "*"), Rx(f"{e}/{r}")) for r in COMMON_REGEXES)]


def _prime_eval(env: str | None) -> list[_P]:
    e = re.escape(env) if env is not None else ".*"  # env list unknown: pattern .* (spec 8.3)
    return [_p("avg@k · all", Rx(f"eval/{e}/all/[^/]+/avg@.*")),
            _p("avg@k · effective", Rx(f"eval/{e}/effective/[^/]+/avg@.*")),
            _p("reward", Rx(f"eval/{e}/effective/(?P<agent>[^/]+)/reward/mean"),
               Rx(f"eval/{e}/all/(?P<agent>[^/]+)/reward/mean"), split=True),
            _p("all/cancelled/mean", Rx(f"eval/{e}/all/cancelled/mean")),
            *(_p(m, Rx(f"eval/{e}/{re.escape(m)}")) for m in COMMON_METRICS),
            *(_p(r.replace("[^/]+", "*"), Rx(f"eval/{e}/{r}")) for r in COMMON_REGEXES)]


def _inf(*names: str) -> tuple[str, ...]:
    return tuple(f"inference/agg/{n}" for n in names)


PRIME_STABILITY = [_p(k, k) for k in ("optim/grad_norm", "entropy/all/mean", "mismatch_kl/all/mean", "kl_ent_ratio/mean")]
PRIME_INFERENCE = [
    _p("KV cache", *_inf("kv_cache_usage_perc/mean", "kv_cache_usage_perc/min", "kv_cache_usage_perc/max"), x="time"),
    _p("preemptions", *_inf("num_preemptions_total:rate/sum", "num_preemptions_total:rate/max"), x="time"),
    _p("running", *_inf("num_requests_running/mean", "num_requests_running/min", "num_requests_running/max"), x="time"),
    _p("waiting", *_inf("num_requests_waiting/mean", "num_requests_waiting/min", "num_requests_waiting/max"), x="time"),
    _p("prefix cache", *_inf("prefix_cache_hit_rate/pooled", "prefix_cache_hit_rate/min"), x="time"),
    _p("generation throughput", *_inf("generation_tokens_total:rate/sum", "generation_tokens_total:rate/min"), x="time"),
    _p("prompt throughput", *_inf("prompt_tokens_total:rate/sum", "prompt_tokens_total:rate/max"), x="time"),
    _p("dispatcher", "dispatcher/inflight/train", "dispatcher/inflight/eval", "concurrency/max_inflight", x="time")]
PRIME_PERF = [_p(k, k) for k in ("perf/mfu", "time/step", "time/wait_for_batch", "time/wait_for_policy")]
PRIME_SFT_TRAIN = [_p(k, k) for k in ("loss/mean", "loss/perplexity", "val/loss", "val/perplexity", "progress/epoch")]
PRIME_SFT_STABILITY = [*(_p(k, k) for k in ("optim/grad_norm", "optim/lr", "loss/nan_count")),
                       _p("max_vio", Rx("max_vio/(mean|max)"))]
PRIME_SFT_PERF = [_p(k, k) for k in ("perf/mfu", "perf/throughput", "perf/peak_memory", "time/step",
                                     "time/forward_backward", "time/save_ckpt")]


def _prime(flavor: str, train_envs: tuple[str, ...], eval_envs: tuple[str, ...]) -> list[tuple[str, list[_P]]]:
    evals = [(f"eval/{e}", _prime_eval(e)) for e in eval_envs] or [("eval", _prime_eval(None))]
    if flavor == "eval":
        return evals
    if flavor == "sft":
        return [("train", PRIME_SFT_TRAIN), *evals, ("stability", PRIME_SFT_STABILITY),
                ("performance", PRIME_SFT_PERF)]
    scopes = [f"train/{e}" for e in train_envs] if len(train_envs) == 1 else ["train/agg"] + [
        f"train/{e}" for e in train_envs]  # unknown env list: one section "train", scope train/agg
    trains = [(s, _prime_train(s)) for s in scopes] if train_envs else [("train", _prime_train("train/agg"))]
    return [*trains, *evals, ("stability", PRIME_STABILITY), ("inference", PRIME_INFERENCE),
            ("performance", PRIME_PERF)]


# verl / SWE-Lego-RL (verl.md 8.1-8.2, section 9) -----------------------------------------------------
VERL_REWARD = [
    _p("score", *_stats("critic/score", *MMM)), _p("rewards (score − KL penalty)", *_stats("critic/rewards", *MMM)),
    _p("advantages", *_stats("critic/advantages", *MMM)), _p("returns", *_stats("critic/returns", *MMM)),
    _p("values", *_stats("critic/values", *MMM), "critic/vpred_mean")]
VERL_POLICY = [
    _p("entropy", "actor/entropy", "actor/entropy_loss"), _p("KL", "actor/ppo_kl", "actor/kl_loss"),
    _p("KL coefficient", "actor/kl_coef"), _p("KL in reward", "actor/reward_kl_penalty", "critic/kl"),
    _p("KL-in-reward coefficient", "actor/reward_kl_penalty_coeff", "critic/kl_coeff"),
    _p("policy loss", "actor/pg_loss", "actor/loss"), _p("clip fraction", "actor/pg_clipfrac", "actor/pg_clipfrac_lower"),
    _p("grad norm", "actor/grad_norm"), _p("learning rate", "actor/lr", "actor/lr(1e-4)"),
    _p("value loss", "critic/vf_loss"), _p("value clip fraction", "critic/vf_clipfrac"),
    _p("value explained variance", "critic/vf_explained_var"), _p("critic grad norm", "critic/grad_norm"),
    _p("critic learning rate", "critic/lr", "critic/lr(1e-4)")]
VERL_LENGTHS = [
    _p("response length", *_stats("response_length", *MMM)),
    _p("response clip ratio / aborted", "response_length/clip_ratio", "response_length_non_aborted/clip_ratio",
       "response/aborted_ratio"),
    _p("non-aborted response length", *_stats("response_length_non_aborted", *MMM)),
    _p("prompt length", *_stats("prompt_length", *MMM)), _p("prompt clip ratio", "prompt_length/clip_ratio"),
    _p("tokens per DP rank", *_stats("global_seqlen", "mean", "min", "max", "balanced_min", "balanced_max")),
    _p("DP rank imbalance", "global_seqlen/minmax_diff")]
_AL = "timing_s/agent_loop"
VERL_AGENT = [  # verl agent loop plus SWE-Lego-RL's harbor_* / proxy_* keys in the same family
    _p("turns", *_stats("num_turns", *MMM)), _p("tool calls", *_stats("tool_call_counts", *MMM)),
    _p("stage time (mean)", Rx(f"{_AL}/(?:harbor_[^/]+|generate_sequences|tool_calls)/mean")),
    _p("stage time (max)", Rx(f"{_AL}/(?:harbor_[^/]+|generate_sequences|tool_calls)/max")),
    _p("preemptions", Rx(f"{_AL}/(?:proxy_)?num_preempted/(?:mean|max)")),
    _p("proxy calls / aborts", Rx(f"{_AL}/proxy_num_(?:calls|aborts)/(?:mean|max)")),
    _p("proxy tokens", Rx(f"{_AL}/proxy_total_[^/]+/mean")), _p("tool gap", Rx(f"{_AL}/proxy_tool_gap_mean/(?:mean|max)")),
    _p("slowest sample", Rx(f"{_AL}/slowest/.+")), _p("other agent-loop", Rx(f"{_AL}/.+"), rest=True)]
VERL_TRAJ_FILTER = [_p("invalid ratio", "trajectory_filter/invalid_ratio"),
                    _p("invalid count", "trajectory_filter/invalid_count"),
                    _p("filter reasons", Rx("trajectory_filter/reason/.+")),
                    _p("other trajectory_filter", Rx("trajectory_filter/.+"), rest=True)]
_RC = "rollout_corr"
VERL_ROLLOUT_CORR = [
    _p("rollout vs training KL", f"{_RC}/kl", f"{_RC}/k3_kl"),
    _p("perplexity", f"{_RC}/training_ppl", f"{_RC}/rollout_ppl"), _p("ppl ratio", f"{_RC}/ppl_ratio"),
    _p("log perplexity", f"{_RC}/training_log_ppl", f"{_RC}/rollout_log_ppl"),
    _p("log-ppl diff", f"{_RC}/log_ppl_diff", f"{_RC}/log_ppl_abs_diff", Rx(f"{_RC}/log_ppl_diff_(?:max|min|p\\d+)")),
    _p("log-ppl diff fractions", Rx(f"{_RC}/log_ppl_diff_gt\\d+_frac")),
    _p("chi²", f"{_RC}/chi2_token", f"{_RC}/chi2_seq"),
    _p("IS weights (token)", Rx(f"{_RC}/rollout_is_(?:mean|max|min|std)")),
    _p("IS effective sample size", f"{_RC}/rollout_is_eff_sample_size", f"{_RC}/rollout_is_batch_norm_factor"),
    _p("IS ratio fractions", Rx(f"{_RC}/rollout_is_ratio_fraction_(?:high|low)")),
    _p("IS weights (sequence)", Rx(f"{_RC}/rollout_is_seq_.+")),
    _p("rejection sampling", Rx(f"{_RC}/rollout_rs_.+")), _p("other rollout_corr", Rx(f"{_RC}/.+"), rest=True),
    _p("rollout vs training probs diff", Rx("training/rollout_probs_diff_.+")),
    _p("rollout vs training probs correlation", "training/rollout_actor_probs_pearson_corr"),
    _p("variance proxy", Rx("variance_proxy/.+"))]
_NOT_STAGE = "(?!(?:step|gen|gen_max|generate_sequences|testing|wait_last_valid|param_sync|merge_val)$)"
VERL_TIMING = [
    _p("step time", "timing_s/step", "timing/step", "perf/time_per_step", "time_per_step"),
    _p("throughput (tokens/s/GPU)", "perf/throughput", "actor/perf/throughput", "Tokens/Sec/GPU"),
    _p("MFU", Rx("perf/mfu/.+"), Rx("actor/perf/mfu.*"), Rx("mfu/.+")),
    _p("total tokens", "perf/total_num_tokens", "total_num_tokens"),
    _p("memory (GB)", "perf/max_memory_allocated_gb", "perf/max_memory_reserved_gb", "perf/cpu_memory_used_gb"),
    _p("generation time", "timing_s/gen", "timing_s/gen_max", "timing_s/generate_sequences", "timing/gen"),
    _p("stage time", Rx(f"timing_s/{_NOT_STAGE}[^/]+"), Rx(f"timing/{_NOT_STAGE}[^/]+")),
    _p("generation timing", Rx("timing_s/generation_timing/.+")),
    _p("time per token (ms)", Rx("timing_per_token_ms/.+"), Rx("timing_per_token/.+"))]
VERL_VAL_TAIL = [
    _p("val loss", "val/loss", "val/perplexity"), _p("val turns", *_stats("val-aux/num_turns", *MMM)),
    _p("validation time", "timing_s/testing", "timing/testing", "timing_s/merge_val", "rollouter/validate_time",
       "trainer/validate_time")]
_FA = "fully_async"
VERL_ASYNC = [
    _p("param version", f"{_FA}/count/current_param_version"),
    _p("stale samples", *_stats(f"{_FA}/count", "staleness_samples", "stale_samples_processed",
                                "stale_trajectory_processed", "dropped_stale_samples")),
    _p("generated samples", f"{_FA}/count/total_generated_samples"),
    _p("wait time", f"{_FA}/total_wait_time", "timing_s/wait_last_valid", "timing_s/param_sync"),
    _p("partial ratio", f"{_FA}/partial/partial_ratio"),
    _p("partial rollouts", f"{_FA}/partial/total_partial_num", f"{_FA}/partial/max_partial_span"),
    _p("processing time", Rx(f"{_FA}/processing_time/.+")),
    _p("idle ratio", "rollouter/idle_ratio", "trainer/idle_ratio"),
    _p("rollouter time", "rollouter/active_time", "rollouter/version_time"),
    _p("other fully_async", Rx(f"{_FA}/.+"), rest=True), _p("other rollouter", Rx("rollouter/.+"), rest=True)]
VERL_SFT = [
    ("Training", [_p("loss", "train/loss"), _p("grad norm", "train/grad_norm"),
                  _p("learning rate", "train/lr", "train/lr(1e-3)"), _p("epoch", "train/epoch")]),
    ("Validation", [_p("val loss", "val/loss", "val/perplexity")]),
    ("Performance", [_p("MFU", "train/mfu"), _p("step time (s)", "train/time(s)"),
                     _p("tokens", "train/global_tokens"), _p("total tokens (B)", "train/total_tokens(B)")])]

VAL_KEY = re.compile(r"^(?P<section>val-core|val-aux)/(?P<ds>.+)/(?P<var>[^/]+)/(?P<metric>(?:mean|std)@(?P<n>\d+)"
                     r"|(?P<agg>best|worst|maj)@(?P<k>\d+)/(?P<stat>mean|std))$")
VAL_TURNS = re.compile(r"^val-aux/num_turns/(min|max|mean)$")
LEGACY_VAL = re.compile(r"^(?:val/)?test_score/(?P<ds>.+)$")


def _verl_val(keys: tuple[str, ...], eval_envs: tuple[str, ...]) -> list[_P]:
    """Per data source: the val-core keys (mean@ first) plus legacy test_score, then val-aux mean@N."""
    core: dict[str, list[str]] = {}
    aux: dict[str, list[str]] = {}
    for k in keys:
        if VAL_TURNS.match(k):
            continue
        m = VAL_KEY.match(k)
        if m:
            if m["section"] == "val-core":
                core.setdefault(m["ds"], []).append(k)
            elif m["metric"].startswith("mean@"):
                aux.setdefault(m["ds"], []).append(k)
        elif (m := LEGACY_VAL.match(k)):
            core.setdefault(m["ds"], []).append(k)
    order = [d for d in eval_envs if d in core or d in aux] + sorted((core.keys() | aux.keys()) - set(eval_envs))
    panels = []
    for ds in order:
        ks = sorted(core.get(ds, []), key=lambda k: ("test_score" in k, "/mean@" not in k, k))
        panels += [_P(f"val score · {ds}", tuple(ks)), _P(f"val-aux mean · {ds}", tuple(sorted(aux.get(ds, []))))]
    return panels


def _verl(flavor: str, keys: tuple[str, ...], eval_envs: tuple[str, ...]) -> list[tuple[str, list[_P]]]:
    if flavor == "sft":
        return VERL_SFT
    return [("Reward & score", VERL_REWARD), ("Policy", VERL_POLICY), ("Lengths", VERL_LENGTHS),
            ("Agent loop", VERL_AGENT), ("Trajectory filter", VERL_TRAJ_FILTER),
            ("Rollout correction / IS", VERL_ROLLOUT_CORR), ("Timing & throughput", VERL_TIMING),
            ("Validation", _verl_val(keys, eval_envs) + VERL_VAL_TAIL), ("Async", VERL_ASYNC)]


# Relax (metrics derived by sources/relax.py) --------------------------------------------------------
STATUSES = ("completed", "truncated", "aborted", "failed", "pending", "unknown")
RELAX = [
    ("Reward", [_p("reward", *_stats("rollout/reward", *MMM)), _p("reward std", "rollout/reward/std"),
                _p("zero-variance groups", "rollout/groups/zero_variance"),
                _p("samples", "rollout/samples", "rollout/reward/count")]),
    ("Lengths", [_p("response length", "rollout/response_length/mean", "rollout/response_length/max"),
                 _p("total length", "rollout/total_length/mean", "rollout/total_length/max")]),
    ("Status", [_p("status fractions", *_stats("rollout/status", *STATUSES)),
                _p("other statuses", Rx("rollout/status/.+"), rest=True)]),
    ("Eval", [_p("eval reward", *_stats("eval/reward", *MMM)),
              _p("eval reward by dataset", Rx("eval/.+/reward/mean")),
              _p("eval response length", "eval/response_length/mean", "eval/response_length/max",
                 Rx("eval/.+/response_length/mean")),
              _p("eval status fractions", *_stats("eval/status", *STATUSES)),
              _p("eval samples", "eval/samples", Rx("eval/.+/samples"))])]


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
    if not isinstance(pat, Rx):
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


def _spec(kind: str, flavor: str, keys, train_envs, eval_envs) -> list[tuple[str, list[_P]]]:
    if kind == "prime-rl":
        return _prime(flavor, train_envs, eval_envs)
    if kind in ("verl", "swe-lego-rl"):
        return _verl(flavor, keys, eval_envs)
    if kind == "relax":
        return RELAX
    raise ValueError(f"no chart sections for run kind {kind!r}")


@lru_cache(maxsize=64)
def _sections(kind: str, flavor: str, keys: tuple[str, ...], train_envs: tuple[str, ...],
              eval_envs: tuple[str, ...]) -> tuple[Section, ...]:
    keyset = frozenset(keys)
    claimed: set[str] = set()
    taken: set[str] = set()
    out = []
    for title, specs in _spec(kind, flavor, keys, train_envs, eval_envs):
        panels: list[Panel] = []
        for spec in specs:
            groups: dict[str | None, list[str]] = {}
            for pat in spec.pats:
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
    """The sections of a run kind/flavor that have at least one logged key (cached per key set)."""
    ks = tuple(sorted({str(k) for k in keys}))
    return list(_sections(kind, flavor or "rl", ks, tuple(train_envs), tuple(eval_envs)))


def covered_keys(sections: Iterable[Section]) -> set[str]:
    """Every key some panel of `sections` shows."""
    return {k for s in sections for p in s.panels for k in p.keys}

