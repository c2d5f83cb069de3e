"""Health rules (`rundash_core.health.checks`, `health_rules`): each rule on a synthetic series that must
trigger it and one that must not, across the kinds' metric names; `Run.health()` on real runs."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import rundash_core as rd
from rundash_core import frames
from rundash_core.health.checks import Signals, Thresholds, health, health_state
from rundash_core.overview import Overview

from helpers import DATA
from helpers.health import DT, T0, noise, signals, tidy


def rules(s: Signals, **kw) -> dict[str, list]:
    out: dict[str, list] = {}
    for f in health(s, thresholds=Thresholds(**kw)):
        out.setdefault(f.rule, []).append(f)
    return out


# Alive ---------------------------------------------------------------------------------------------
def test_stalled_while_running_and_fresh_rows_are_not():
    values = noise(50, 1.0)
    last = T0 + 50 * DT
    stalled = signals({"optim/grad_norm": values}, status="running", now=last + 30 * 60, max_steps=100)
    found = rules(stalled)
    assert found["stalled"][0].severity == "critical" and found["stalled"][0].area == "alive"
    assert found["stalled"][0].evidence["seconds_since_last_row"] == pytest.approx(30 * 60)
    assert found["stalled"][0].message.startswith("no new step for 30m 00s after step 50")
    assert health_state(health(stalled)) == "Stalled"
    fresh = signals({"optim/grad_norm": values}, status="running", now=last + 30, max_steps=100)
    assert "stalled" not in rules(fresh)
    assert health_state(health(fresh)) == "Healthy"


def _live(series: dict, *, dt: float, now: float, step: int | None, started: float | None = None,
          updated: float | None = None, timed: bool = True) -> Signals:
    """A running run whose metric rows are `dt` apart (`timed=False`: rows without times, as a
    verl console log has), its overview's start / last logged time given."""
    frame = tidy(series, dt=dt)
    if not timed:
        frame["time"] = np.nan
    ts = lambda x: pd.Timestamp(x, unit="s", tz="UTC") if x is not None else None  # noqa: E731
    ov = Overview(run_id="r", name="r", kind="verl", path="/r", status="running", step=step, max_steps=58,
                  last_step=step, started=ts(started), updated=ts(updated))
    return Signals(kind="verl", overview=ov, tidy=frame, now=now)


def test_a_stall_is_several_of_the_runs_own_step_times():
    # 20-minute steps: 45 minutes without a step is 2¼ steps, not a stall; 2 hours is 6 steps
    slow = {"actor/grad_norm": noise(30, 1.0)}
    last = T0 + 30 * 1200.0
    assert "stalled" not in rules(_live(slow, dt=1200.0, now=last + 45 * 60, step=30))
    f = rules(_live(slow, dt=1200.0, now=last + 2 * 3600, step=30))["stalled"][0]
    assert f.evidence["typical_step_s"] == pytest.approx(1200.0) and f.evidence["limit_s"] == pytest.approx(6000.0)
    # a console log without per-step times: its timing_s/step and its last logged time
    untimed = {"actor/grad_norm": noise(30, 1.0), "timing_s/step": np.full(30, 600.0)}
    quiet = _live(untimed, dt=600.0, now=T0 + 3 * 3600, step=30, updated=T0, timed=False)
    f = rules(quiet)["stalled"][0]
    assert f.evidence["typical_step_s"] == 600.0 and f.evidence["seconds_since_last_row"] == pytest.approx(3 * 3600)
    assert health_state(health(quiet)) == "Stalled"
    assert "stalled" not in rules(_live(untimed, dt=600.0, now=T0 + 1800, step=30, updated=T0, timed=False))


def test_a_running_run_that_never_logged_a_step():
    nothing: dict = {}
    waiting = _live(nothing, dt=DT, now=T0 + 20 * 60, step=None, started=T0)
    f = rules(waiting)["stalled"][0]
    assert f.message.startswith("no step logged 20m 00s after the run started")
    assert health_state(health(waiting)) == "Stalled"
    starting = health(_live(nothing, dt=DT, now=T0 + 60, step=None, started=T0))  # just started: a note
    assert [(f.rule, f.severity) for f in starting] == [("no_step_yet", "info")]
    assert starting[0].message == "no step logged yet, 1m 00s after the run started (stalled after 5m 00s)"
    assert health_state(starting) == "Healthy"


def test_stopped_short_of_max_steps_or_before_any_step_is_down_and_a_completed_run_is_not():
    values = noise(50, 1.0)
    stopped = signals({"optim/grad_norm": values}, status="stopped", max_steps=200, finished=False)
    assert rules(stopped)["stopped"][0].message == "the run stopped at step 50 of 200"
    done = signals({"optim/grad_norm": values}, status="completed", max_steps=50)
    assert "stopped" not in rules(done)
    ov = Overview(run_id="r", name="r", kind="verl", path="/r", status="stopped", step=None, max_steps=58)
    never = Signals(kind="verl", overview=ov, tidy=tidy({}), now=T0)
    assert [f.message for f in health(never)] == ["the run stopped before logging a step (step 0 of 58)"]
    assert health_state(health(never)) == "Down"


def test_a_run_without_steps_or_step_limit_is_never_down_or_stalled_for_it():
    # an eval-only run logs no trainer step: done, it reads Stopped; running, it is timed by nothing
    ov = Overview(run_id="r", name="r", kind="prime-rl", path="/r", status="stopped", step=None, max_steps=None,
                  flavor="eval")
    done = health(Signals(kind="prime-rl", overview=ov, tidy=tidy({}), now=T0))
    assert [(f.rule, f.severity) for f in done] == [("stopped", "info")] and health_state(done) == "Stopped"
    assert "logged no step" in done[0].message
    running = _live({}, dt=DT, now=T0 + 3 * 3600, step=None, started=T0)
    running.overview.max_steps = None
    assert [f.rule for f in health(running)] == ["no_step_yet"] and health_state(health(running)) == "Healthy"


def test_a_stop_with_no_step_limit_is_stopped_not_healthy():
    unknown = signals({"optim/grad_norm": noise(50, 1.0)}, status="stopped", finished=False)
    unknown.overview.max_steps = None
    f = rules(unknown)["stopped"][0]
    assert f.severity == "info" and "may be done or cut short" in f.message
    assert health_state(health(unknown)) == "Stopped"


def test_step_rate_is_steps_per_hour():
    from rundash_core.health.alive import step_rate

    assert step_rate(signals({"optim/grad_norm": noise(50, 1.0)})) == pytest.approx(3600.0 / DT)


# Stability -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind,key", [("prime-rl", "entropy/all/mean"), ("verl", "actor/entropy")])
def test_entropy_collapse(kind, key):
    collapsing = np.linspace(1.0, 0.1, 100)
    f = rules(signals({key: collapsing}, kind=kind))["entropy_collapse"][0]
    assert f.metric == key and f.evidence["recent"] < 0.25 * f.evidence["early"]
    assert "entropy_collapse" not in rules(signals({key: noise(100, 1.0)}, kind=kind))


def test_entropy_spike():
    v = noise(100, 0.5, 0.01)
    v[70] = 2.0
    assert rules(signals({"entropy/all/mean": v}))["entropy_spike"][0].evidence["worst_step"] == 71
    assert "entropy_spike" not in rules(signals({"entropy/all/mean": noise(100, 0.5, 0.01)}))


@pytest.mark.parametrize("kind,key", [("prime-rl", "optim/grad_norm"), ("verl", "actor/grad_norm")])
def test_grad_norm_spikes_by_robust_z(kind, key):
    v = noise(200, 1.0, 0.05)
    v[[60, 150]] = [8.0, 6.0]
    f = rules(signals({key: v}, kind=kind))["grad_norm_spike"][0]
    assert f.evidence["spikes"] == 2 and f.evidence["spike_steps"] == [61, 151]
    assert (f.step_start, f.step_end) == (61, 151) and f.area == "stability"
    # a slow rise is not a spike, nor is noise
    assert "grad_norm_spike" not in rules(signals({key: np.linspace(1, 3, 200) + noise(200, 0, 0.05)}, kind=kind))


def test_a_spike_that_recovered_is_a_dated_note_and_a_current_one_a_warning():
    v = noise(100, 1.0, 0.05)
    v[70] = 9.0
    running = signals({"optim/grad_norm": v}, status="running", max_steps=500, finished=False)
    note = rules(running)["grad_norm_spike"][0]
    assert note.severity == "info" and note.evidence["recovered"] and note.step_end == 71
    assert note.message.endswith("the last at step 71, recovered by step 74")
    assert health_state(health(running)) == "Healthy"
    v[99] = 9.0  # the newest step spiked: it may be the start of a divergence
    now = rules(signals({"optim/grad_norm": v}, status="running", max_steps=500, finished=False))["grad_norm_spike"][0]
    assert now.severity == "warning" and now.message.endswith("the last at step 100, not yet recovered")
    assert health_state([now]) == "Degraded"
    ended = rules(signals({"optim/grad_norm": v}))["grad_norm_spike"][0]  # completed: nothing can follow
    assert ended.severity == "info" and ended.message.endswith("at the run's end")


def test_entropy_that_settled_low_is_a_note_and_one_still_falling_a_warning():
    settled = np.r_[np.linspace(1.0, 0.1, 30), noise(170, 0.1, 0.005)]
    f = rules(signals({"actor/entropy": settled}, kind="verl"))
    assert "entropy_collapse" not in f and f["entropy_low"][0].severity == "info"
    assert 20 <= f["entropy_low"][0].evidence["low_since"] <= 40
    falling = np.r_[noise(140, 0.1, 0.005), np.linspace(0.1, 0.01, 60)]
    assert rules(signals({"actor/entropy": falling}, kind="verl"))["entropy_collapse"][0].severity == "warning"


def test_values_rounded_by_the_log_spike_only_beyond_their_last_digit():
    # a console log printing three decimals: a pg_loss of -0.002 among ±0.001 is two digits, not z 1e9
    rounded = np.random.default_rng(1).choice([-0.001, 0.0, 0.0, 0.001], 100)
    rounded[80] = -0.002
    assert "loss_spike" not in rules(signals({"actor/pg_loss": rounded}, kind="verl"))
    rounded[80] = -0.05
    assert rules(signals({"actor/pg_loss": rounded}, kind="verl"))["loss_spike"][0].evidence["worst_step"] == 81


@pytest.mark.parametrize("kind,key", [("prime-rl", "mismatch_kl/all/mean"), ("swe-lego-rl", "rollout_corr/kl")])
def test_mismatch_kl_rising(kind, key):
    rising = np.linspace(1e-3, 2e-2, 100)
    assert rules(signals({key: rising}, kind=kind))["mismatch_kl_rising"][0].metric == key
    assert "mismatch_kl_rising" not in rules(signals({key: noise(100, 1e-3, 1e-4)}, kind=kind))


def test_non_finite_values_and_nan_counts():
    v = noise(30, 1.0)
    v[12] = np.inf
    f = rules(signals({"loss/mean": v}))["non_finite"][0]
    assert f.severity == "critical" and f.metric == "loss/mean" and f.step_start == 13
    nan_counts = np.zeros(30)
    nan_counts[20:] = 2
    assert rules(signals({"loss/nan_count": nan_counts}))["nan_count"][0].step_start == 21
    clean = rules(signals({"loss/mean": noise(30, 1.0), "loss/nan_count": np.zeros(30)}))
    assert "non_finite" not in clean and "nan_count" not in clean


def test_loss_spikes_both_ways():
    v = noise(100, 0.0, 0.01)
    v[80] = -1.0
    assert rules(signals({"actor/pg_loss": v}, kind="verl"))["loss_spike"][0].evidence["worst_step"] == 81
    assert "loss_spike" not in rules(signals({"actor/pg_loss": noise(100, 0.0, 0.01)}, kind="verl"))


# Progress ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind,key", [("prime-rl", "train/agg/effective/agent/reward/mean"),
                                      ("verl", "critic/score/mean"), ("relax", "rollout/reward/mean")])
def test_reward_drop(kind, key):
    v = np.r_[np.linspace(0.2, 0.8, 100), np.linspace(0.8, 0.3, 40)] + noise(140, 0, 0.02)
    f = rules(signals({key: v}, kind=kind))["reward_drop"][0]
    assert f.metric == key and 90 <= f.evidence["peak_step"] <= 110 and f.evidence["recent"] < 0.5
    rising = np.linspace(0.2, 0.8, 140) + noise(140, 0, 0.02)
    assert "reward_drop" not in rules(signals({key: rising}, kind=kind))


def test_reward_plateau():
    key = "train/agg/effective/agent/reward/mean"
    flat = np.r_[np.linspace(0.2, 0.7, 50), noise(150, 0.7, 0.02)]
    assert rules(signals({key: flat}))["reward_plateau"][0].severity == "info"
    assert "reward_plateau" not in rules(signals({key: np.linspace(0.2, 0.9, 200) + noise(200, 0, 0.02)}))


def _validation(values) -> pd.DataFrame:
    return frames.typed([{"event": f"step {s}", "step": s, "source": "ds", "statistic": "mean@1", "value": v,
                          "n": 8, "core": True} for s, v in zip(range(0, 10 * len(values), 10), values)],
                        frames.VALIDATION)


def test_val_score_drop_from_the_validation_frame_and_from_metrics():
    base = {"critic/score/mean": noise(40, 0.5)}
    f = rules(signals(base, kind="verl", validation=_validation([0.3, 0.6, 0.4])))["val_drop"][0]
    assert (f.step_start, f.step_end, f.evidence["best"]) == (10, 20, 0.6)
    assert "val_drop" not in rules(signals(base, kind="verl", validation=_validation([0.3, 0.5, 0.6])))
    # no validation frame: the "val score" alias over the metrics (verl val-core keys)
    val = np.full(40, np.nan)
    val[[9, 19, 29, 39]] = [0.3, 0.7, 0.6, 0.4]
    metrics = {**base, "val-core/gsm8k/acc/mean@1": val[~np.isnan(val)]}
    assert "val_drop" in rules(signals(metrics, kind="verl"))


def test_val_drop_of_a_loss_is_a_rise():
    def losses(values) -> pd.DataFrame:
        return frames.typed([{"event": f"step {s}", "step": s, "source": "all", "statistic": "loss", "value": v,
                              "n": None, "core": True} for s, v in zip((29, 58, 87), values)], frames.VALIDATION)

    base = {"train/loss": noise(90, 0.5)}
    f = rules(signals(base, kind="verl", validation=losses([0.5, 0.41, 0.47])))["val_drop"][0]
    assert f.message == "eval loss 0.470 at step 87 is above its best 0.410 (step 58)"
    assert "val_drop" not in rules(signals(base, kind="verl", validation=losses([0.5, 0.45, 0.41])))


def test_response_length_drift_and_truncation():
    grows = np.linspace(100, 400, 100)
    assert rules(signals({"response_length/mean": grows}, kind="verl"))["length_drift"][0].evidence["recent"] > 300
    assert "length_drift" not in rules(signals({"response_length/mean": noise(100, 200, 5)}, kind="verl"))
    clipped = rules(signals({"response_length/clip_ratio": noise(50, 0.3)}, kind="verl"))["truncation"][0]
    assert clipped.severity == "warning" and clipped.evidence["recent"] == pytest.approx(0.3, abs=0.02)
    key = "train/agg/effective/agent/is_truncated/mean"
    assert "truncation" in rules(signals({key: noise(50, 0.4)}))
    assert "truncation" not in rules(signals({key: noise(50, 0.05, 0.01)}))


def test_error_and_no_signal_fractions():
    err = "train/agg/all/agent/has_error/mean"
    assert rules(signals({err: noise(50, 0.2)}))["errors"][0].severity == "warning"
    assert rules(signals({err: noise(50, 0.6)}))["errors"][0].severity == "critical"
    assert "errors" not in rules(signals({err: noise(50, 0.01, 0.005)}))
    assert "no_signal" in rules(signals({"rollout/groups/zero_variance": noise(20, 0.7)}, kind="relax"))
    assert "no_signal" not in rules(signals({"rollout/groups/zero_variance": noise(20, 0.2)}, kind="relax"))
    trainable = "train/agg/all/agent/is_trainable/mean"  # no signal = 1 - trainable
    no_signal = rules(signals({trainable: noise(50, 0.3)}))["no_signal"][0]
    assert no_signal.evidence["recent"] == pytest.approx(0.7, abs=0.02)
    assert "no_signal" not in rules(signals({trainable: noise(50, 0.9)}))


# Performance ---------------------------------------------------------------------------------------
def test_trainer_waiting_on_batches_vs_orchestrator_waiting_on_policy():
    def perf(wait_batch: float) -> dict:
        return {"time/step": ("trainer", np.full(40, 10.0)),
                "time/wait_for_batch": ("trainer", np.full(40, wait_batch))}

    found = rules(signals(perf(7.0)))
    assert "add inference" in found["trainer_waits"][0].message and "orchestrator_waits" not in found
    assert found["trainer_waits"][0].evidence == {"wait_s": 7.0, "active_s": 3.0}
    assert "trainer_waits" not in rules(signals(perf(2.0)))
    orch = {"time/step": ("orch", np.full(40, 10.0)), "time/wait_for_policy": ("orch", np.full(40, 6.0))}
    assert "add trainers" in rules(signals(orch))["orchestrator_waits"][0].message
    orch["time/wait_for_policy"] = ("orch", np.full(40, 1.0))
    assert "orchestrator_waits" not in rules(signals(orch))
    assert "trainer_waits" in rules(signals({"trainer/idle_ratio": noise(20, 0.7)}, kind="verl"))
    assert not rules(signals({"trainer/idle_ratio": noise(20, 0.1)}, kind="verl"))


def test_off_policy_staleness_and_dropped_rollouts():
    assert rules(signals({"off_policy/mean": ("orch", noise(40, 6.0))}))["staleness"][0].evidence["recent"] > 5
    assert "staleness" not in rules(signals({"off_policy/mean": ("orch", noise(40, 1.0))}))
    dropped = np.zeros(40)
    dropped[35] = 3
    assert rules(signals({"off_policy/dropped": ("orch", dropped)}))["stale_dropped"][0].evidence["dropped"] == 3
    assert "stale_dropped" not in rules(signals({"off_policy/dropped": ("orch", np.zeros(40))}))
    counter = np.r_[np.zeros(30), np.arange(1, 11)]  # verl's cumulative counter
    assert "stale_dropped" in rules(signals({"fully_async/count/dropped_stale_samples": counter}, kind="verl"))


@pytest.mark.parametrize("kind,key", [("prime-rl", "perf/mfu"), ("verl", "perf/mfu/actor")])
def test_mfu_drop(kind, key):
    assert rules(signals({key: np.r_[noise(60, 40, 1), noise(30, 20, 1)]}, kind=kind))["mfu_drop"][0].metric == key
    assert "mfu_drop" not in rules(signals({key: noise(90, 40, 1)}, kind=kind))


# Over real runs ------------------------------------------------------------------------------------
def test_health_states_and_ordering():
    v = noise(200, 1.0, 0.05)
    v[60] = 8.0
    s = signals({"optim/grad_norm": v, "loss/nan_count": np.r_[np.zeros(150), np.ones(50)]}, status="stopped",
                max_steps=400, finished=False)
    found = health(s)
    assert [f.severity for f in found] == sorted((f.severity for f in found), key=["critical", "warning", "info"].index)
    assert found[0].area == "alive" and health_state(found) == "Down"
    assert health_state([f for f in found if f.area != "alive"]) == "Degraded"


def test_run_health_reads_frames_only_on_every_kind(monkeypatch):
    from rundash_core.io import files

    runs = rd.discover([DATA])
    assert set(runs["kind"]) >= {"prime-rl", "verl", "swe-lego-rl", "relax"}
    for path, run_id in zip(runs["path"], runs["run_id"]):
        run = rd.open_run(path, run_id=run_id)
        found = run.health()
        assert all(isinstance(f, rd.Finding) for f in found)
        json.dumps([f.to_dict() for f in found])  # JSON-safe evidence
        s = Signals.from_run(run)
        with monkeypatch.context() as m:  # the rules never touch a file
            m.setattr(files, "open_file", lambda *a, **k: pytest.fail("a rule opened a file"))
            assert [f.to_dict() for f in health(s)] == [f.to_dict() for f in health(s)]


def test_sources_name_only_known_concepts_and_an_unknown_one_is_an_error():
    from rundash_core import sources
    from rundash_core.health.checks import CONCEPTS

    for kind in sources.kinds():
        unknown = set(sources.source_for(kind).concepts) - set(CONCEPTS)
        assert not unknown, (kind, unknown)
    s = signals({"actor/pg_loss": noise(20, 0.1)}, kind="swe-lego-rl")  # verl's concepts
    assert s.concept("loss")[0] == "actor/pg_loss"
    assert signals({"actor/pg_loss": noise(20, 0.1)}, kind="prime-rl").concept("loss") is None  # not a prime-rl key
    with pytest.raises(KeyError, match="unknown health concept"):
        s.concept("no such concept")
