"""Benchmarks of rundash against the tools a user would otherwise reach for.

Run them with `python -m benchmarks <subcommand>` (see `__main__`); each subcommand is a
module here (`metrics`), with its data generator beside it (`metrics_data`) and the shared
machinery in `common`.
"""
