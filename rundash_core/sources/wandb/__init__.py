"""W&B run folders (`wandb/run-*`, `wandb/offline-run-*`), read from their `run-<id>.wandb`
transaction logs without the W&B service (docs/formats/wandb.md): `records` (the LevelDB-log
framing), `history` (history records into rows), `log` (following a run's attempts), `store`
(their merged metrics), `run` (`WandbRun`, detection), `demo_run` (the demo's W&B run)."""
