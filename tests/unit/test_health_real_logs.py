"""Health verdicts and findings on real public verl logs, one test per log, each expectation
reasoned from the log's curves (the comment above it), and the check-in's eval line on the real
prime-rl sample. The logs are copies (`data/verl/SOURCES.md`, `data/verl-public/SOURCES.md`): old
data, so each run is judged as of an hour from now, when no file of it is being written."""
from __future__ import annotations

import os
import time

import pytest

import rundash_core as rd
from rundash_core.health.checkin import eval_text, run_checkin
from rundash_core.health.checks import Signals, health, health_state
from rundash_core.views import validation as val

from helpers import DATA
from helpers.health import checkin_fields

VERL, PUBLIC = DATA / "verl", DATA / "verl-public"


def judged(path, now: float | None = None) -> tuple[str, dict[str, str], Signals]:
    """(verdict, {rule: severity}, signals) of the run at `path`, as of `now` (default: an hour
    after its files were last written, so none of them says running)."""
    run = rd.open_run(path)
    if now is None:
        now = max(time.time(), os.stat(path).st_mtime) + 3600
    s = Signals.from_run(run, now=now)
    found = health(s)
    rules = {f.rule: f.severity for f in found}
    assert len(rules) == len(found)  # one finding per rule on these logs
    return health_state(found), rules, s


def by_rule(s: Signals, rule: str):
    return next(f for f in health(s) if f.rule == rule)


def test_dq_math_degraded_by_what_happened_at_its_end():
    # Qwen2-7B on MATH, 210 of 210 steps. Reward climbed to ~0.94 and held, but around step 165
    # the responses tripled (~220 → ~640 tokens), about half of them hit the length cap
    # (clip_ratio ~0.48) and the entropy fell again (~0.03 → ~0.012): the run ended degraded.
    # pg_loss and entropy are printed with three decimals: their ±0.001 moves are not spikes.
    verdict, rules, s = judged(VERL / "dq_math.log")
    assert verdict == "Degraded"
    assert rules == {"entropy_collapse": "warning", "truncation": "warning", "reward_plateau": "info",
                     "length_drift": "info"}
    assert by_rule(s, "truncation").evidence["recent"] == pytest.approx(0.43, abs=0.02)
    assert "still falling" in by_rule(s, "entropy_collapse").message
    # validation: mean@1 over gsm8k and MATH, 0.689 at the end vs its best 0.711, within 10%: no val_drop
    assert eval_text(s) == ["eval mean@1 over 2 sources 0.689 at step 210 (best 0.711 at step 125)"]


def test_qwen_prompt1024_completed_near_its_best_is_healthy():
    # Qwen2.5-0.5B on GSM8K, 435 steps to its final validation. Reward rose to ~0.72 and plateaued,
    # test_score ends at 0.569 against its best 0.579. Entropy fell from ~0.54 to ~0.06 by step ~90
    # and stayed there for 340 steps while reward still rose: it settled, not collapsing now. The
    # grad-norm excursions (worst 15 at step 175) each came back to ~3; the last is the final step.
    verdict, rules, s = judged(VERL / "eh_Qwen2.5-0.5B-bsz256_2-prompt1024-resp512-0.567.log")
    assert verdict == "Healthy"
    assert rules == {"grad_norm_spike": "info", "entropy_low": "info", "entropy_spike": "info",
                     "reward_plateau": "info"}
    assert by_rule(s, "grad_norm_spike").evidence["worst_step"] == 175
    assert by_rule(s, "entropy_spike").message.endswith("the last at step 373, recovered by step 376")
    assert eval_text(s) == ["eval test_score 0.569 at step 434 (best 0.579 at step 349)"]


def test_gemma_sft_completed_with_falling_val_loss_is_healthy():
    # gemma-2-2b-it SFT, 58 of 58 steps; train loss 0.046 → ~0.01, val loss 0.420 → 0.411: a loss,
    # so lower is better and the last event is the best.
    verdict, rules, s = judged(VERL / "eh_gemma-2-2b-it-sft-0.411.log")
    assert (verdict, rules) == ("Healthy", {})
    assert eval_text(s) == ["eval loss 0.411 at step 58 (best 0.411 at step 58)"]


def test_qwen_prompt512_completed_near_its_best_is_healthy():
    # Qwen2.5-0.5B on GSM8K with shorter prompts/responses, 435 steps to its final validation.
    # Reward ~0.70 plateaued; test_score 0.519 at the end vs best 0.538 (within 10%). Entropy settled
    # near 0.06 from step ~120. Grad norm spikes (worst 41.9 at step 43) all returned to ~4–5, the
    # last at step 429 back by 432; entropy's one blip at 429 (0.075 vs ~0.06) too.
    verdict, rules, s = judged(PUBLIC / "eh_Qwen2.5-0.5B-bsz256_2-prompt512-resp256-0.538.log")
    assert verdict == "Healthy"
    assert rules == {"grad_norm_spike": "info", "entropy_low": "info", "entropy_spike": "info",
                     "reward_plateau": "info"}
    assert by_rule(s, "grad_norm_spike").evidence["worst_step"] == 43
    assert eval_text(s) == ["eval test_score 0.519 at step 434 (best 0.538 at step 199)"]


def test_gemma_ppo_cut_without_a_step_limit_is_stopped():
    # gemma-2-2b-it PPO for 15 epochs (no total_training_steps): the log ends at step 105 with no
    # final validation, so nothing says whether it finished. Its curves are fine: reward 0.42 →
    # ~0.68, test_score 0.621 vs best 0.640, two grad-norm spikes at steps 60 and 73 that came back.
    verdict, rules, s = judged(PUBLIC / "eh_gemma-2-2b-it-ppo-bsz512_4-prompt1024-resp-512-0.640.log")
    assert verdict == "Stopped"
    assert rules == {"stopped": "info", "grad_norm_spike": "info"}
    assert by_rule(s, "grad_norm_spike").evidence["spike_steps"] == [60, 73]
    assert eval_text(s) == ["eval test_score 0.621 at step 99 (best 0.640 at step 59)"]


def _cut(tmp_path, lines: int):
    """The real SFT log cut after `lines` lines: a run as it looked part-way."""
    text = (VERL / "eh_gemma-2-2b-it-sft-0.411.log").read_bytes().split(b"\n")
    path = tmp_path / "sft.log"
    path.write_bytes(b"\n".join(text[:lines]) + b"\n")
    return path


def test_the_real_sft_log_stopped_before_its_first_step_is_down(tmp_path):
    # cut before its `step:0` line (it printed "total number of steps 58") and no longer written
    verdict, rules, s = judged(_cut(tmp_path, 62))
    assert verdict == "Down" and rules == {"stopped": "critical"}
    assert by_rule(s, "stopped").message == "the run stopped before logging a step (step 0 of 58)"


def test_the_real_sft_log_not_advancing_while_written_is_stalled(tmp_path):
    # cut at step 29 (its last stamped line at 07:27:41): ten minutes later its file is still being
    # written but no step came; with no step times logged, the 5-minute floor is the limit
    path = _cut(tmp_path, 100)
    updated = rd.open_run(path).overview().updated.timestamp()
    now = updated + 600
    os.utime(path, (now - 20, now - 20))
    verdict, rules, s = judged(path, now=now)
    assert verdict == "Stalled" and rules["stalled"] == "critical"
    assert by_rule(s, "stalled").message.startswith("no new step for 10m 00s after step 29")
    verdict, _rules, _s = judged(path, now=updated + 120)  # two minutes: not yet
    assert verdict != "Stalled"


def test_prime_rl_check_in_names_the_validation_headline_statistic():
    # gsm8k eval at steps 0, 4 and 8: avg@2 0.167, 0.500, 0.833 (pass@2 reaches 1.0; the old
    # "eval score" averaged avg@2, pass@1 and pass@2 into 0.8889)
    run = rd.open_run(DATA / "prime-rl" / "math-python+wiki-search--qwen3-4b--0b45f1ec")
    assert val.headline_statistic(run.validation()) == "avg@2"  # what Validation shows by default
    progress = checkin_fields(run_checkin(run))["Progress"]
    assert "eval avg@2 0.833 at step 8 (best 0.833 at step 8)" in progress and "0.8889" not in progress
