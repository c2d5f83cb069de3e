"""prime-rl output directories: `docs/formats/prime-rl.md`."""
