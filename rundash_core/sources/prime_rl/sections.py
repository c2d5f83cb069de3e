"""prime-rl's chart sections: its W&B "overview" in order (spec 8.3), per train env and eval env.

`sections` is what its `Source` carries; `charts.sections` matches the patterns against the keys a
run logged and drops what is not there, so one table serves every era of the format.
"""
from __future__ import annotations

import re

from rundash_core.charts.sections import KeyRegex, PanelSpec, SectionSpecs, panel

COMMON_METRICS = ("effective/num_total_tokens/mean", "effective/num_turns/mean", "effective/num_branches/mean")
COMMON_REGEXES = ("all/[^/]+/has_error/mean", "effective/[^/]+/is_truncated/mean",
                  # "some versions add" is_timeout, under effective or all: both, when present
                  "effective/[^/]+/is_timeout/mean", "all/[^/]+/is_timeout/mean")


def _train(scope: str) -> list[PanelSpec]:
    e = re.escape(scope)
    return [panel("reward · effective", KeyRegex(f"{e}/effective/(?P<agent>[^/]+)/reward/mean"), split=True),
            panel("reward · all", KeyRegex(f"{e}/all/(?P<agent>[^/]+)/reward/mean"), split=True),
            *(panel(m, f"{scope}/{m}") for m in COMMON_METRICS),
            *(panel(r.replace("[^/]+", "*"), KeyRegex(f"{e}/{r}")) for r in COMMON_REGEXES)]


def _eval(env: str | None) -> list[PanelSpec]:
    e = re.escape(env) if env is not None else ".*"  # env list unknown: pattern .* (spec 8.3)
    return [panel("avg@k · all", KeyRegex(f"eval/{e}/all/[^/]+/avg@.*")),
            panel("avg@k · effective", KeyRegex(f"eval/{e}/effective/[^/]+/avg@.*")),
            panel("reward", KeyRegex(f"eval/{e}/effective/(?P<agent>[^/]+)/reward/mean"),
                  KeyRegex(f"eval/{e}/all/(?P<agent>[^/]+)/reward/mean"), split=True),
            panel("all/cancelled/mean", KeyRegex(f"eval/{e}/all/cancelled/mean")),
            *(panel(m, KeyRegex(f"eval/{e}/{re.escape(m)}")) for m in COMMON_METRICS),
            *(panel(r.replace("[^/]+", "*"), KeyRegex(f"eval/{e}/{r}")) for r in COMMON_REGEXES)]


def _inference(*names: str) -> tuple[str, ...]:
    return tuple(f"inference/agg/{n}" for n in names)


STABILITY = [panel(k, k) for k in ("optim/grad_norm", "entropy/all/mean", "mismatch_kl/all/mean", "kl_ent_ratio/mean")]
INFERENCE = [
    panel("KV cache", *_inference("kv_cache_usage_perc/mean", "kv_cache_usage_perc/min", "kv_cache_usage_perc/max"),
          x="time"),
    panel("preemptions", *_inference("num_preemptions_total:rate/sum", "num_preemptions_total:rate/max"), x="time"),
    panel("running", *_inference("num_requests_running/mean", "num_requests_running/min", "num_requests_running/max"),
          x="time"),
    panel("waiting", *_inference("num_requests_waiting/mean", "num_requests_waiting/min", "num_requests_waiting/max"),
          x="time"),
    panel("prefix cache", *_inference("prefix_cache_hit_rate/pooled", "prefix_cache_hit_rate/min"), x="time"),
    panel("generation throughput", *_inference("generation_tokens_total:rate/sum", "generation_tokens_total:rate/min"),
          x="time"),
    panel("prompt throughput", *_inference("prompt_tokens_total:rate/sum", "prompt_tokens_total:rate/max"), x="time"),
    panel("dispatcher", "dispatcher/inflight/train", "dispatcher/inflight/eval", "concurrency/max_inflight", x="time")]
PERFORMANCE = [panel(k, k) for k in ("perf/mfu", "time/step", "time/wait_for_batch", "time/wait_for_policy")]
SFT_TRAIN = [panel(k, k) for k in ("loss/mean", "loss/perplexity", "val/loss", "val/perplexity", "progress/epoch")]
SFT_STABILITY = [*(panel(k, k) for k in ("optim/grad_norm", "optim/lr", "loss/nan_count")),
                 panel("max_vio", KeyRegex("max_vio/(mean|max)"))]
SFT_PERFORMANCE = [panel(k, k) for k in ("perf/mfu", "perf/throughput", "perf/peak_memory", "time/step",
                                         "time/forward_backward", "time/save_ckpt")]


def sections(flavor: str, keys: tuple[str, ...], train_envs: tuple[str, ...],
             eval_envs: tuple[str, ...]) -> SectionSpecs:
    """One train section per train env (plus train/agg with several), one eval section per eval
    env, then stability, inference and performance; an SFT run has its own; an eval-only run only
    its evals."""
    evals = [(f"eval/{e}", _eval(e)) for e in eval_envs] or [("eval", _eval(None))]
    if flavor == "eval":
        return evals
    if flavor == "sft":
        return [("train", SFT_TRAIN), *evals, ("stability", SFT_STABILITY), ("performance", SFT_PERFORMANCE)]
    scopes = [f"train/{e}" for e in train_envs] if len(train_envs) == 1 else ["train/agg"] + [
        f"train/{e}" for e in train_envs]  # unknown env list: one section "train", scope train/agg
    trains = [(s, _train(s)) for s in scopes] if train_envs else [("train", _train("train/agg"))]
    return [*trains, *evals, ("stability", STABILITY), ("inference", INFERENCE), ("performance", PERFORMANCE)]
