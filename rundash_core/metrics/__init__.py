"""Metric rows as frames: the merged store of a metrics JSONL, growable blocks, which rows count as a step."""
