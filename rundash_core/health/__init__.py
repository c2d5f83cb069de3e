"""Health: rule-based findings over a run's frames, the one-word state, the monitor-run check-in."""
