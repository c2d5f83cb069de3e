"""SWE-Lego-RL runs: a verl console log plus its Harbor trial dirs (`docs/formats/swe-lego-rl.md`)."""
