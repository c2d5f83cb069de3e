"""The terminal view (`rundash tui`) driven headless: run the app with a script, open a tab, the
text a widget draws; and log lines as `run.read_log` answers them. textual is imported only by the
functions that need it (the TUI tests skip without it)."""
from __future__ import annotations

import asyncio

import pandas as pd

from rundash_core import frames

SIZE = (150, 50)  # the terminal's columns and rows


def shown(app, selector: str) -> str:
    """The text a widget of the current screen draws."""
    from textual.widgets import Static

    return str(app.screen.query_one(selector, Static).render())


def run_app(app, script, size=SIZE):
    """Run the textual `app` headless at `size` (columns, rows) and `await script(app, pilot)` in it."""
    async def go():
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            await script(app, pilot)
    asyncio.run(go())


async def open_tab(app, pilot, key: str):
    """Open the run screen's `key` tab and let it draw."""
    app.screen.query_one("#run-tabs").active = f"tab-{key}"
    await pilot.pause()
    await pilot.pause()


def log_frame() -> pd.DataFrame:
    """Lines as `run.read_log` answers them: through the gate (`rundash_core.safety.gate`)."""
    from rundash_core.safety.gate import gated

    t0 = pd.Timestamp("2026-01-02 03:04:05", tz="UTC")
    return gated(frames.typed([
        {"time": t0, "component": "orchestrator", "level": "INFO", "text": "step 1 done", "path": "/r/orch.log", "offset": 0},
        {"time": t0 + pd.Timedelta(seconds=1), "component": "trainer", "level": "ERROR",
         "text": "CUDA out of memory [bold red]x[/]", "path": "/r/trainer.log", "offset": 0},
        {"time": t0 + pd.Timedelta(seconds=2), "component": "trainer", "level": "debug",
         "text": "OPENAI_API_KEY=sk-live-SECRET-VALUE-123", "path": "/r/trainer.log", "offset": 40},
        {"time": None, "component": None, "level": None, "text": "a continuation \x1b[1mline\x1b[0m",
         "path": "/r/trainer.log", "offset": 90},
    ], frames.LOG_LINES))
