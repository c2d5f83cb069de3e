"""`rundash tui`: the textual app driven through textual's own harness (`App.run_test()` and its
pilot) on the demo runs and on a Relax run written here, asserting what is on screen. The
coroutines run with `asyncio.run` inside plain tests (no pytest plugin needed)."""
from __future__ import annotations

import html
import json
import re
import subprocess
import sys

import pytest

from rundash_core import frames

textual = pytest.importorskip("textual")

from textual.widgets import DataTable, Select, SelectionList  # noqa: E402

from rundash_core.tui import main  # noqa: E402
from rundash_core.tui.app import RundashApp, RunScreen, RunsScreen  # noqa: E402
from rundash_core.tui.highlight import compile_mask  # noqa: E402

from helpers import REPO
from helpers.tui import log_frame, open_tab, run_app, shown

ROOT = REPO
HOSTILE = "[bold red]x[/] and [@click=app.quit]click me[/] and \\[escaped]"


def on_screen(app) -> str:
    """Every line the terminal shows (the screenshot's text, line by line)."""
    svg = app.export_screenshot()
    lines: dict[float, list[tuple[float, str]]] = {}
    for x, y, body in re.findall(r'<text class="[^"]*" x="([\d.]+)" y="([\d.]+)"[^>]*>([^<]*)</text>', svg):
        lines.setdefault(float(y), []).append((float(x), html.unescape(body).replace("\xa0", " ")))
    return "\n".join("".join(t for _x, t in sorted(parts)) for _y, parts in sorted(lines.items()))


@pytest.fixture(scope="module")
def relax_run(tmp_path_factory):
    """A Relax run whose sample text carries textual markup, pad-token runs and `<think>`, with an
    eval step of two datasets."""
    save = tmp_path_factory.mktemp("tui") / "relax-[b]hostile[@click=app.quit]"
    train, evals = save / "rollout_result" / "train", save / "rollout_result" / "eval"
    train.mkdir(parents=True)
    evals.mkdir()
    rows = [{"rollout_id": 0, "sample_index": i, "group_index": i // 2, "status": "completed",
             "prompt": "<|im_start|>user\nLook <|vision_start|>" + "<|image_pad|>" * 6 + f"<|vision_end|> #{i}<|im_end|>\n",
             "response": f"<think>reason {i}</think>{HOSTILE} answer {i}" + " word" * (10 * i),
             "reward": [0.5, 1.0, 0.0][i], "response_length": 10 * (i + 1), "total_length": 40 + 10 * i,
             "label": "42"} for i in range(3)]
    (train / "0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (train / "1.jsonl").write_text(json.dumps({**rows[0], "rollout_id": 1}) + "\n")
    ev = [{**rows[i], "rollout_id": 1, "dataset": ["gsm8k", "[i]aime"][i % 2]} for i in range(3)]
    (evals / "1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ev))
    return save


# Runs list -----------------------------------------------------------------------------------------
def test_the_runs_list_shows_every_run_and_enter_opens_its_card(demo_runs):
    folder, runs = demo_runs

    async def script(app, pilot):
        table = app.screen.query_one("#runs-table", DataTable)
        assert table.row_count == len(runs)
        screen = on_screen(app)
        for run_id, kind, status in zip(runs.run_id, runs.kind, runs.status):
            assert re.search(rf"{re.escape(run_id[:40])}.*{kind}\s+{status}", screen), run_id
        await pilot.press("j")
        assert table.cursor_row == 1
        await pilot.press("k", "down", "down")
        assert table.cursor_row == 2
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, RunScreen) and app.screen.run.run_id == runs.run_id[2]
        card = app.screen.run.overview()
        text = on_screen(app)
        assert f"step {card.step}" in text and re.search(rf"status +{card.status}", text)
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, RunsScreen)
        await pilot.press("slash")
        await pilot.press(*"qwen3-4b")
        await pilot.pause()
        assert app.is_running  # `q` typed into the search box is text, not quit
        kept = [r for r in runs.run_id if "qwen3-4b" in r]
        assert table.row_count == len(kept) >= 1
        await pilot.press("escape", "q")
        await pilot.pause()
        assert not app.is_running

    run_app(RundashApp([str(folder)]), script)


def test_keys_switch_the_tabs_and_the_footer_names_them(demo_runs):
    folder, runs = demo_runs
    order = ["overview", "metrics", "samples", "logs"]

    def active(app) -> str:
        return app.screen.query_one("#run-tabs").active.removeprefix("tab-")

    async def script(app, pilot):
        footer = on_screen(app).splitlines()[-1]
        assert "] Next tab" in footer and "[ Prev tab" in footer and "1-4 Tab" in footer, footer
        for expected in order[1:] + order[:1]:  # `]` goes round, back to the card
            await pilot.press("right_square_bracket")
            await pilot.pause()
            await pilot.pause()
            assert active(app) == expected
        await pilot.press("left_square_bracket")
        await pilot.pause()
        assert active(app) == "logs"
        for key, expected in zip("2314", ["metrics", "samples", "overview", "logs"]):
            await pilot.press(key)
            await pilot.pause()
            await pilot.pause()
            assert active(app) == expected
        await pilot.press("2")  # a tab opened again has the keys: j moves its table, not a hidden one
        await pilot.pause()
        table = app.screen.query_one("#metrics-table", DataTable)
        assert app.screen.focused is table
        await pilot.press("j")
        assert table.cursor_row == 1
        await pilot.press("slash", "3")  # typed into the search box: text, not a tab switch
        await pilot.pause()
        assert active(app) == "metrics" and app.screen.query_one("#metrics-search").value == "3"

    run_app(RundashApp([runs.path[0]]), script)


# Metrics -------------------------------------------------------------------------------------------
def test_metrics_show_each_sections_keys_with_trend_last_value_and_a_plot(demo_runs):
    folder, runs = demo_runs
    path = runs.path[0]

    async def script(app, pilot):
        await open_tab(app, pilot, "metrics")
        table = app.screen.query_one("#metrics-table", DataTable)
        assert table.row_count > 5
        first = [str(c) for c in table.get_row_at(0)]
        row = app.screen.query_one("MetricsPane").shown[0]
        assert first[1] == row.label and first[3] == f"{row.last:.4g}" and first[4].startswith("step ")
        assert set(first[2]) <= set("▁▂▃▄▅▆▇█") and len(first[2]) > 5
        assert shown(app, "#metrics-plot").startswith(row.label)
        await pilot.press("j")
        assert table.cursor_row == 1
        assert shown(app, "#metrics-plot").startswith(app.screen.query_one("MetricsPane").shown[1].label)
        await pilot.press("slash", *"entropy")
        await pilot.pause()
        labels = [str(table.get_row_at(i)[1]) for i in range(table.row_count)]
        assert labels and all("entropy" in label for label in labels)

    run_app(RundashApp([path]), script)


def test_a_run_without_samples_says_so_in_its_samples_tab(tmp_path):
    import shutil

    import rundash_core as rd

    shutil.copy(ROOT / "tests" / "data" / "verl" / "dq_math.log", tmp_path / "dq_math.log")
    path = str(tmp_path)
    assert "samples" not in rd.open_run(tmp_path / "dq_math.log").capabilities

    async def script(app, pilot):
        await open_tab(app, pilot, "samples")
        assert "This run has no samples" in shown(app, "#sample-text")
        await pilot.press("right", "left", "j")  # nothing to step through: no error either
        assert app.is_running

    run_app(RundashApp([path]), script)


# Samples -------------------------------------------------------------------------------------------
def test_samples_are_shown_literally_with_pads_masked_and_arrows_step_through_them(relax_run):
    async def script(app, pilot):
        assert isinstance(app.screen, RunScreen)  # a single run opens directly
        await open_tab(app, pilot, "samples")
        text = shown(app, "#sample-text")
        assert HOSTILE in text and HOSTILE.replace("\\[", "[") not in text.replace(HOSTILE, "")
        assert "<|vision_start|>******<|vision_end|> #0" in text and "<|image_pad|>" not in text
        assert "<think>reason 0</think>" in text and "Sample info" in text and "label" in text
        screen = on_screen(app)
        assert "[bold red]x[/] and [@click=app.quit]click me[/]" in screen
        assert "relax-[b]hostile[@click=app.quit] · relax" in screen  # the run's name too
        assert app.is_running
        assert "sample 1 of 3" in shown(app, "#sample-pos")
        await pilot.press("right")
        assert "sample 2 of 3" in shown(app, "#sample-pos") and "reason 1" in shown(app, "#sample-text")
        await pilot.press("right", "right")
        assert "sample 3 of 3" in shown(app, "#sample-pos")
        await pilot.press("left")
        assert "sample 2 of 3" in shown(app, "#sample-pos")
        await pilot.press("slash", *"word")
        await pilot.pause()
        assert "10 matches" in shown(app, "#sample-pos")

    run_app(RundashApp([str(relax_run)], mask=compile_mask(None)[0]), script)


def test_sort_dataset_picker_and_field_checkboxes(relax_run):
    async def script(app, pilot):
        await open_tab(app, pilot, "samples")
        pane = app.screen.query_one("SamplesPane")
        assert app.screen.query_one("#sample-env", Select).display is False  # step 0 holds no dataset
        app.screen.query_one("#sample-sort", Select).value = "reward_desc"
        await pilot.pause()
        assert list(pane.view["reward"]) == [1.0, 0.5, 0.0] and "reason 1" in shown(app, "#sample-text")
        app.screen.query_one("#sample-sort", Select).value = "output_tokens_asc"
        await pilot.pause()
        assert list(pane.view["output_tokens"]) == sorted(pane.view["output_tokens"])
        app.screen.query_one("#sample-split", Select).value = "eval"
        app.screen.query_one("#sample-step", Select).value = 1
        await pilot.pause()
        env = app.screen.query_one("#sample-env", Select)
        assert env.display is True
        env.value = "[i]aime"
        await pilot.pause()
        assert list(pane.view["env"]) == ["[i]aime"] and "sample 1 of 1" in shown(app, "#sample-pos")
        assert "[i]aime" in on_screen(app)  # the picker shows the dataset's name as written
        fields = app.screen.query_one("#sample-fields", SelectionList)
        fields.deselect("prompt")
        fields.deselect("info")
        await pilot.pause()
        text = shown(app, "#sample-text")
        assert "Prompt ·" not in text and "Sample info" not in text and "Response ·" in text

    run_app(RundashApp([str(relax_run)], mask=None), script)


def test_an_empty_mask_shows_the_pad_tokens(relax_run):
    async def script(app, pilot):
        await open_tab(app, pilot, "samples")
        assert "<|image_pad|>" * 6 in shown(app, "#sample-text")

    run_app(RundashApp([str(relax_run)], mask=compile_mask("")[0]), script)


def test_r_reads_the_open_tab_again(relax_run, tmp_path):
    import shutil

    run_dir = shutil.copytree(relax_run, tmp_path / "live")

    async def script(app, pilot):
        await open_tab(app, pilot, "samples")
        assert "step 2" not in on_screen(app)
        step = app.screen.query_one("#sample-step", Select)
        before = [v for _label, v in step._options]
        (run_dir / "rollout_result" / "train" / "2.jsonl").write_text(
            (run_dir / "rollout_result" / "train" / "1.jsonl").read_text().replace('"rollout_id": 1', '"rollout_id": 2'))
        await pilot.press("r")
        await pilot.pause()
        after = [v for _label, v in app.screen.query_one("#sample-step", Select)._options]
        assert 2 not in before and 2 in after
        assert "sample 1 of" in shown(app, "#sample-pos")

    run_app(RundashApp([str(run_dir)]), script)


# Logs ----------------------------------------------------------------------------------------------
def test_logs_say_no_logs_when_empty_then_show_a_frame_filtered_by_level(relax_run):
    async def script(app, pilot):
        await open_tab(app, pilot, "logs")
        pane = app.screen.query_one("LogsPane")
        if app.screen.run.logs().empty:
            assert "no logs" in shown(app, "#log-text")
        pane.show_lines(log_frame())
        await pilot.pause()
        text = shown(app, "#log-text")
        assert "4 of 4 lines" in text and "CUDA out of memory [bold red]x[/]" in text and "SECRET" not in text
        levels = app.screen.query_one("#log-levels", SelectionList)
        levels.deselect("ERROR")
        await pilot.pause()
        text = shown(app, "#log-text")
        assert "3 of 4 lines" in text and "CUDA" not in text and "step 1 done" in text
        pane.show_lines(frames.empty(frames.LOG_LINES))
        await pilot.pause()
        assert "no logs" in shown(app, "#log-text")

    run_app(RundashApp([str(relax_run)]), script)


# The command ---------------------------------------------------------------------------------------
def test_without_textual_the_command_says_how_to_install_the_extra(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "textual", None)  # `import textual` raises ImportError
    assert main(["tui", str(tmp_path)]) == 2
    assert 'pip install "rundash[tui]"' in capsys.readouterr().err


def test_rundash_tui_goes_through_the_cli_dispatcher(monkeypatch, capsys, tmp_path):
    from rundash_core.serve import cli

    monkeypatch.setitem(sys.modules, "textual", None)
    assert cli.main(["tui", str(tmp_path)]) == 2
    assert "rundash[tui]" in capsys.readouterr().err


def test_bad_arguments_exit_2_with_a_reason(capsys, tmp_path):
    assert main(["tui", str(tmp_path / "nope")]) == 2
    assert "no such file or directory" in capsys.readouterr().err
    assert main(["tui", str(tmp_path), "--mask-str", "(?<=x)"]) == 2
    assert "--mask-str: invalid regex" in capsys.readouterr().err


def test_the_web_app_never_imports_textual(demo_runs):
    folder, _runs = demo_runs
    code = ("import os, sys; os.environ['RUNDASH_DIRS'] = sys.argv[1];"
            "from streamlit.testing.v1 import AppTest;"
            "at = AppTest.from_file(sys.argv[2], default_timeout=90).run(); assert not at.exception;"
            "import rundash_core, rundash_core.serve.cli, rundash_core.tui;"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'textual'))")
    out = subprocess.run([sys.executable, "-c", code, str(folder), str(ROOT / "app.py")], capture_output=True,
                         text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"
