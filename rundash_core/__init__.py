"""rundash_core: LLM RL training run directories as pandas frames.

    import rundash_core as rd
    runs = rd.discover(["outputs/"])
    run = rd.open_run(runs.path[0])
    run.metrics()          # tidy: step, time, metric, value, producer
    run.samples()          # one row per sample; run.episode(sample_id) -> rd.Episode

Every reader hides secrets (`rundash_core.safety.gate`); `rd.open_run(path, reveal=True)` shows raw values.
"""
from rundash_core import frames, sources
from rundash_core.ai import analysis_context, analyze
from rundash_core.discover import discover, list_runs
from rundash_core.frames import Episode, Message, ToolCall
from rundash_core.health.checks import Finding
from rundash_core.overview import Overview
from rundash_core.run import CAPABILITIES, Problem, Run, RunError
from rundash_core.sources import open_run

__all__ = ["discover", "list_runs", "open_run", "Run", "Overview", "Problem", "RunError", "KINDS", "CAPABILITIES",
           "Episode", "Message", "ToolCall", "frames", "Finding", "analysis_context", "analyze"]
__version__ = "0.1.0"


def __getattr__(name: str):
    if name == "KINDS":  # the registered kinds (`sources.kinds()`), so a source registered later is listed too
        return sources.kinds()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
