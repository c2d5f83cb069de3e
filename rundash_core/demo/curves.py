"""Seeded curves of a simulated RL run: expected reward, lengths and learning rate as a function of
the step, and batches of episode outcomes drawn around them. Every draw comes from an RNG seeded by
(run, step, attempt, salt), so any step can be recomputed alone: that is what keeps the demo a
deterministic function of `now` and lets the live writer continue a run it did not write."""
from __future__ import annotations

import uuid

import numpy as np

from rundash_core.demo.specs import ENVS, RLRunSpec

SEED = 20260924


def random_uuid(rng: np.random.Generator, dashed: bool = False) -> str:
    u = uuid.UUID(bytes=rng.bytes(16), version=4)
    return str(u) if dashed else u.hex


class Curves:
    def __init__(self, spec: RLRunSpec):
        self.spec = spec

    def rng(self, *salt: int) -> np.random.Generator:
        return np.random.default_rng([SEED, self.spec.salt, *[int(x) % (1 << 31) for x in salt]])

    def progress(self, step: float) -> float:
        """0 at the start of training, approaching 1 with time constant `tau` steps."""
        return 1.0 - np.exp(-max(step, 0) / self.spec.tau)

    def _toward(self, start: float, end: float, step: float) -> float:
        return start + (end - start) * self.progress(step)

    def reward_p(self, env: str, step: float) -> float:
        e = ENVS[env]
        return self._toward(e.r0, e.r1, step)

    def out_mean(self, env: str, step: float) -> float:
        e = ENVS[env]
        return self._toward(e.out0, e.out1, step)

    def turns_mean(self, env: str, step: float) -> float:
        e = ENVS[env]
        return self._toward(e.turns0, e.turns1, step)

    def lr(self, step: int) -> float:
        """Linear warmup, then cosine decay to 10% of the peak."""
        s = self.spec
        if step <= s.warmup:
            return s.lr * step / max(s.warmup, 1)
        frac = (step - s.warmup) / max(s.max_steps - s.warmup, 1)
        return s.lr * (0.1 + 0.9 * 0.5 * (1 + np.cos(np.pi * min(frac, 1.0))))

    def orch_duration(self, step: int, attempt: int) -> float:
        """Seconds the orchestrator spends on a step; grows with the output lengths."""
        rng = self.rng(step, attempt, 7)
        growth = np.mean([self.out_mean(e, step) / self.out_mean(e, 0) for e in self.spec.train_envs]) ** 0.5
        return float(self.spec.step_s * growth * rng.lognormal(0, 0.12))

    def sample_batch(self, rng: np.random.Generator, env: str, step: int, groups: int, k: int) -> dict:
        """One batch of `groups` x `k` episode outcomes of `env` (arrays, one entry per rollout)."""
        e = ENVS[env]
        p = self.reward_p(env, step)
        n = groups * k
        if e.binary:
            pg = np.clip(p + rng.normal(0, 0.15, groups), 0.02, 0.98)
            rew = (rng.random((groups, k)) < pg[:, None]).astype(float)
        else:
            c = 7.0
            rew = rng.beta(max(p * c, 0.05), max((1 - p) * c, 0.05), (groups, k))
        out = rng.lognormal(np.log(self.out_mean(env, step)) - 0.08, 0.42, n)
        trunc = out >= e.max_tokens
        out = np.minimum(out, e.max_tokens).round()
        if e.turns0 > 1:
            turns = 1 + rng.poisson(max(self.turns_mean(env, step) - 1, 0.0), n)
            turns = np.minimum(turns, 8)
        else:
            turns = np.ones(n)
        inp = (e.in_tok * (1 + 0.9 * (turns - 1)) * rng.lognormal(0, 0.12, n)).round()
        err = rng.random(n) < e.err_rate
        flat = rew.ravel()
        if e.binary:
            flat[trunc] = 0.0
        flat[err] = 0.0
        rew = flat.reshape(groups, k)
        if e.binary:
            solved = rew.sum(axis=1)
            trainable_g = (solved > 0) & (solved < k)
        else:
            trainable_g = rew.std(axis=1) > 1e-6
            solved = (rew >= 0.999).sum(axis=1)
        trainable = np.repeat(trainable_g, k) & ~err
        agent_t = out / rng.uniform(55, 75, n) + (turns - 1) * rng.uniform(0.4, 1.5, n)
        setup_t = rng.lognormal(np.log(0.8 if e.turns0 > 1 else 0.05), 0.4, n)
        scoring_t = rng.lognormal(np.log(0.03), 0.5, n)
        extra = {}
        if "num_tool_calls" in e.metrics:
            extra["num_tool_calls"] = np.maximum(turns - 1, 0)
        if "num_python_errors" in e.metrics:
            extra["num_python_errors"] = rng.binomial(np.maximum(turns - 1, 0).astype(int), 0.12)
        return dict(reward=flat, out=out, inp=inp, total=out + inp, turns=turns, trunc=trunc, err=err,
                    trainable=trainable, solved=solved, k=k, agent_t=agent_t, setup_t=setup_t,
                    scoring_t=scoring_t, total_t=agent_t + setup_t + scoring_t + 0.2, extra=extra, env=env)

    @staticmethod
    def pool(batches: list[dict]) -> dict:
        """The batches of several envs as one (for the `train/agg` scope); no env, no env metrics."""
        out = {}
        for key in ("reward", "out", "inp", "total", "turns", "trunc", "err", "trainable", "solved",
                    "agent_t", "setup_t", "scoring_t", "total_t"):
            out[key] = np.concatenate([b[key] for b in batches])
        out["k"] = batches[0]["k"]
        out["extra"] = {}
        out["env"] = None
        return out
