"""Relax `rollout_result/` folders: `docs/formats/relax.md`."""
