"""verl's chart sections, from its key catalog (spec 8.1-8.2, section 9); SWE-Lego-RL logs the
same keys (a verl console log plus harbor_*/proxy_* agent-loop keys) and its `Source` reuses these.

`sections` is what the `Source` carries; `charts.sections` matches the patterns against the keys a
run logged and drops what is not there, so one table serves every verl version.
"""
from __future__ import annotations

import re

from rundash_core.charts.sections import MEAN_MAX_MIN, KeyRegex, PanelSpec, SectionSpecs, panel, stat_keys

REWARD = [
    panel("score", *stat_keys("critic/score", *MEAN_MAX_MIN)),
    panel("rewards (score − KL penalty)", *stat_keys("critic/rewards", *MEAN_MAX_MIN)),
    panel("advantages", *stat_keys("critic/advantages", *MEAN_MAX_MIN)),
    panel("returns", *stat_keys("critic/returns", *MEAN_MAX_MIN)),
    panel("values", *stat_keys("critic/values", *MEAN_MAX_MIN), "critic/vpred_mean")]
POLICY = [
    panel("entropy", "actor/entropy", "actor/entropy_loss"), panel("KL", "actor/ppo_kl", "actor/kl_loss"),
    panel("KL coefficient", "actor/kl_coef"), panel("KL in reward", "actor/reward_kl_penalty", "critic/kl"),
    panel("KL-in-reward coefficient", "actor/reward_kl_penalty_coeff", "critic/kl_coeff"),
    panel("policy loss", "actor/pg_loss", "actor/loss"),
    panel("clip fraction", "actor/pg_clipfrac", "actor/pg_clipfrac_lower"),
    panel("grad norm", "actor/grad_norm"), panel("learning rate", "actor/lr", "actor/lr(1e-4)"),
    panel("value loss", "critic/vf_loss"), panel("value clip fraction", "critic/vf_clipfrac"),
    panel("value explained variance", "critic/vf_explained_var"), panel("critic grad norm", "critic/grad_norm"),
    panel("critic learning rate", "critic/lr", "critic/lr(1e-4)")]
LENGTHS = [
    panel("response length", *stat_keys("response_length", *MEAN_MAX_MIN)),
    panel("response clip ratio / aborted", "response_length/clip_ratio", "response_length_non_aborted/clip_ratio",
          "response/aborted_ratio"),
    panel("non-aborted response length", *stat_keys("response_length_non_aborted", *MEAN_MAX_MIN)),
    panel("prompt length", *stat_keys("prompt_length", *MEAN_MAX_MIN)),
    panel("prompt clip ratio", "prompt_length/clip_ratio"),
    panel("tokens per DP rank", *stat_keys("global_seqlen", "mean", "min", "max", "balanced_min", "balanced_max")),
    panel("DP rank imbalance", "global_seqlen/minmax_diff")]
_AL = "timing_s/agent_loop"
AGENT = [  # verl agent loop plus SWE-Lego-RL's harbor_* / proxy_* keys in the same family
    panel("turns", *stat_keys("num_turns", *MEAN_MAX_MIN)),
    panel("tool calls", *stat_keys("tool_call_counts", *MEAN_MAX_MIN)),
    panel("stage time (mean)", KeyRegex(f"{_AL}/(?:harbor_[^/]+|generate_sequences|tool_calls)/mean")),
    panel("stage time (max)", KeyRegex(f"{_AL}/(?:harbor_[^/]+|generate_sequences|tool_calls)/max")),
    panel("preemptions", KeyRegex(f"{_AL}/(?:proxy_)?num_preempted/(?:mean|max)")),
    panel("proxy calls / aborts", KeyRegex(f"{_AL}/proxy_num_(?:calls|aborts)/(?:mean|max)")),
    panel("proxy tokens", KeyRegex(f"{_AL}/proxy_total_[^/]+/mean")),
    panel("tool gap", KeyRegex(f"{_AL}/proxy_tool_gap_mean/(?:mean|max)")),
    panel("slowest sample", KeyRegex(f"{_AL}/slowest/.+")), panel("other agent-loop", KeyRegex(f"{_AL}/.+"), rest=True)]
TRAJECTORY_FILTER = [panel("invalid ratio", "trajectory_filter/invalid_ratio"),
                     panel("invalid count", "trajectory_filter/invalid_count"),
                     panel("filter reasons", KeyRegex("trajectory_filter/reason/.+")),
                     panel("other trajectory_filter", KeyRegex("trajectory_filter/.+"), rest=True)]
_RC = "rollout_corr"
ROLLOUT_CORRECTION = [
    panel("rollout vs training KL", f"{_RC}/kl", f"{_RC}/k3_kl"),
    panel("perplexity", f"{_RC}/training_ppl", f"{_RC}/rollout_ppl"), panel("ppl ratio", f"{_RC}/ppl_ratio"),
    panel("log perplexity", f"{_RC}/training_log_ppl", f"{_RC}/rollout_log_ppl"),
    panel("log-ppl diff", f"{_RC}/log_ppl_diff", f"{_RC}/log_ppl_abs_diff",
          KeyRegex(f"{_RC}/log_ppl_diff_(?:max|min|p\\d+)")),
    panel("log-ppl diff fractions", KeyRegex(f"{_RC}/log_ppl_diff_gt\\d+_frac")),
    panel("chi²", f"{_RC}/chi2_token", f"{_RC}/chi2_seq"),
    panel("IS weights (token)", KeyRegex(f"{_RC}/rollout_is_(?:mean|max|min|std)")),
    panel("IS effective sample size", f"{_RC}/rollout_is_eff_sample_size", f"{_RC}/rollout_is_batch_norm_factor"),
    panel("IS ratio fractions", KeyRegex(f"{_RC}/rollout_is_ratio_fraction_(?:high|low)")),
    panel("IS weights (sequence)", KeyRegex(f"{_RC}/rollout_is_seq_.+")),
    panel("rejection sampling", KeyRegex(f"{_RC}/rollout_rs_.+")),
    panel("other rollout_corr", KeyRegex(f"{_RC}/.+"), rest=True),
    panel("rollout vs training probs diff", KeyRegex("training/rollout_probs_diff_.+")),
    panel("rollout vs training probs correlation", "training/rollout_actor_probs_pearson_corr"),
    panel("variance proxy", KeyRegex("variance_proxy/.+"))]
_NOT_STAGE = "(?!(?:step|gen|gen_max|generate_sequences|testing|wait_last_valid|param_sync|merge_val)$)"
TIMING = [
    panel("step time", "timing_s/step", "timing/step", "perf/time_per_step", "time_per_step"),
    panel("throughput (tokens/s/GPU)", "perf/throughput", "actor/perf/throughput", "Tokens/Sec/GPU"),
    panel("MFU", KeyRegex("perf/mfu/.+"), KeyRegex("actor/perf/mfu.*"), KeyRegex("mfu/.+")),
    panel("total tokens", "perf/total_num_tokens", "total_num_tokens"),
    panel("memory (GB)", "perf/max_memory_allocated_gb", "perf/max_memory_reserved_gb", "perf/cpu_memory_used_gb"),
    panel("generation time", "timing_s/gen", "timing_s/gen_max", "timing_s/generate_sequences", "timing/gen"),
    panel("stage time", KeyRegex(f"timing_s/{_NOT_STAGE}[^/]+"), KeyRegex(f"timing/{_NOT_STAGE}[^/]+")),
    panel("generation timing", KeyRegex("timing_s/generation_timing/.+")),
    panel("time per token (ms)", KeyRegex("timing_per_token_ms/.+"), KeyRegex("timing_per_token/.+"))]
VALIDATION_TAIL = [
    panel("val loss", "val/loss", "val/perplexity"), panel("val turns", *stat_keys("val-aux/num_turns", *MEAN_MAX_MIN)),
    panel("validation time", "timing_s/testing", "timing/testing", "timing_s/merge_val", "rollouter/validate_time",
          "trainer/validate_time")]
_FA = "fully_async"
ASYNC = [
    panel("param version", f"{_FA}/count/current_param_version"),
    panel("stale samples", *stat_keys(f"{_FA}/count", "staleness_samples", "stale_samples_processed",
                                      "stale_trajectory_processed", "dropped_stale_samples")),
    panel("generated samples", f"{_FA}/count/total_generated_samples"),
    panel("wait time", f"{_FA}/total_wait_time", "timing_s/wait_last_valid", "timing_s/param_sync"),
    panel("partial ratio", f"{_FA}/partial/partial_ratio"),
    panel("partial rollouts", f"{_FA}/partial/total_partial_num", f"{_FA}/partial/max_partial_span"),
    panel("processing time", KeyRegex(f"{_FA}/processing_time/.+")),
    panel("idle ratio", "rollouter/idle_ratio", "trainer/idle_ratio"),
    panel("rollouter time", "rollouter/active_time", "rollouter/version_time"),
    panel("other fully_async", KeyRegex(f"{_FA}/.+"), rest=True),
    panel("other rollouter", KeyRegex("rollouter/.+"), rest=True)]
SFT = [
    ("Training", [panel("loss", "train/loss"), panel("grad norm", "train/grad_norm"),
                  panel("learning rate", "train/lr", "train/lr(1e-3)"), panel("epoch", "train/epoch")]),
    ("Validation", [panel("val loss", "val/loss", "val/perplexity")]),
    ("Performance", [panel("MFU", "train/mfu"), panel("step time (s)", "train/time(s)"),
                     panel("tokens", "train/global_tokens"), panel("total tokens (B)", "train/total_tokens(B)")])]

# "@" or "_": TensorBoard writers spell verl's mean@4 as mean_4 (a verl run's tensorboard logger)
VAL_KEY = re.compile(r"^(?P<section>val-core|val-aux)/(?P<ds>.+)/(?P<var>[^/]+)/(?P<metric>(?:mean|std)[@_](?P<n>\d+)"
                     r"|(?P<agg>best|worst|maj)[@_](?P<k>\d+)/(?P<stat>mean|std))$")
VAL_TURNS = re.compile(r"^val-aux/num_turns/(min|max|mean)$")
LEGACY_VAL = re.compile(r"^(?:val/)?test_score/(?P<ds>.+)$")


def _validation(keys: tuple[str, ...], eval_envs: tuple[str, ...]) -> list[PanelSpec]:
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
            elif m["metric"].startswith(("mean@", "mean_")):
                aux.setdefault(m["ds"], []).append(k)
        elif (m := LEGACY_VAL.match(k)):
            core.setdefault(m["ds"], []).append(k)
    order = [d for d in eval_envs if d in core or d in aux] + sorted((core.keys() | aux.keys()) - set(eval_envs))
    panels = []
    for ds in order:
        ks = sorted(core.get(ds, []), key=lambda k: ("test_score" in k, not re.search(r"/mean[@_]\d+$", k), k))
        panels += [PanelSpec(f"val score · {ds}", tuple(ks)),
                   PanelSpec(f"val-aux mean · {ds}", tuple(sorted(aux.get(ds, []))))]
    return panels


def sections(flavor: str, keys: tuple[str, ...], train_envs: tuple[str, ...],
             eval_envs: tuple[str, ...]) -> SectionSpecs:
    """verl's RL sections in catalog order (validation per data source, from the logged keys), or
    its SFT trainer's."""
    if flavor == "sft":
        return SFT
    return [("Reward & score", REWARD), ("Policy", POLICY), ("Lengths", LENGTHS), ("Agent loop", AGENT),
            ("Trajectory filter", TRAJECTORY_FILTER), ("Rollout correction / IS", ROLLOUT_CORRECTION),
            ("Timing & throughput", TIMING), ("Validation", _validation(keys, eval_envs) + VALIDATION_TAIL),
            ("Async", ASYNC)]
