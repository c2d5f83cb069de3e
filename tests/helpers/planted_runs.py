"""Real runs of every kind with the secret corpus (`helpers.secret_corpus.SPELLINGS`) planted in every text
field their formats have: what the planted-secret test (`test_planted_secrets.py`) reads back.

Each run starts from a copy of tests/data and keeps every file valid in its format (JSON stays
JSON, a TOML file parses, a verl config print stays a Python literal), so a reader sees the
secrets where a trainer would have written them: configs and command lines, log lines, report
Markdown, model outputs, reasoning, tool calls and tool results, trial exception messages, sample
and eval text. `plant(folder)` returns the runs and, per run, which spellings went into which
field (a spelling whose syntax cannot stand alone in a file, e.g. a YAML block in a TOML file,
goes there as a string value instead).
"""
from __future__ import annotations

import ast
import json
import os
import pprint
import shlex
import shutil
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from helpers import DATA
from helpers.secret_corpus import SPELLINGS

PRIME = DATA / "prime-rl-traces" / "reverse-text--qwen3-0.6b--a7be3ee1"
LEGO = DATA / "lego"
LEGO_LOG = "qwen3-8b-swegym-gspo-async-r1.log"
OLD = 1_790_000_000.0  # long finished: a planted run is never "running"
MARK = "PLANTED-EPISODE"  # in every planted model output: how a test finds the episodes to open


@dataclass
class PlantedRun:
    kind: str
    path: Path  # what `rd.open_run` opens
    where: dict[str, list[int]] = field(default_factory=dict)  # field -> indexes into SPELLINGS

    def put(self, name: str, indexes) -> None:
        self.where.setdefault(name, []).extend(indexes)


ALL = range(len(SPELLINGS))


def _texts() -> list[str]:
    return [s.text for s in SPELLINGS]


def _log_lines(prefix: str, tag: str) -> str:
    """Every spelling as a log line (`prefix` + text; a multi-line text continues on the next lines)."""
    return "".join(f"{prefix}{tag} {i}: {t}\n" for i, t in enumerate(_texts()))


def _markdown() -> str:
    """A report holding every spelling in prose, in a list, and in a fenced block."""
    out = ["---", "title: Planted report", "---", "", "# Findings", ""]
    for i, t in enumerate(_texts()):
        out += [f"Step {i}: the run printed {t}", "", f"- item {i}: `{t.splitlines()[0]}`", "", "```", t, "```", ""]
    return "\n".join(out) + "\n"


def _fits_toml(text: str) -> bool:
    try:
        return bool(tomllib.loads(text))
    except (tomllib.TOMLDecodeError, ValueError):
        return False


def _as_json(text: str):
    """A spelling that is JSON (or the members of an object) as parsed JSON, else None."""
    for candidate in (text, "{" + text + "}"):
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, (dict, list)):
            return value
    return None


def _as_literal(text: str):
    """A spelling that is a Python dict literal (or its items) as the dict, else None."""
    for candidate in (text, "{" + text + "}"):
        try:
            value = ast.literal_eval(candidate)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        if isinstance(value, dict):
            return value
    return None


def _structured() -> dict:
    """Every spelling as a string value, and those that parse as JSON as themselves."""
    out = {f"note_{i}": t for i, t in enumerate(_texts())}
    out.update({f"parsed_{i}": v for i, t in enumerate(_texts()) if (v := _as_json(t)) is not None})
    return out


def _touch_old(root: Path) -> None:
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            os.utime(os.path.join(dirpath, name), (OLD, OLD), follow_symlinks=False)
    os.utime(root, (OLD, OLD))


# prime-rl -----------------------------------------------------------------------------------------
def plant_prime(out: Path) -> PlantedRun:
    run_dir = out / PRIME.name
    shutil.copytree(PRIME, run_dir, symlinks=True)
    shutil.copy(DATA / "prime-rl-old" / PRIME.name / "metrics.jsonl", run_dir / "metrics.jsonl")  # (same run)
    run = PlantedRun("prime-rl", run_dir)
    cfg = run_dir / "configs" / "orchestrator.json"
    value = json.loads(cfg.read_text())
    value["planted"] = _structured()
    cfg.write_text(json.dumps(value, indent=2))
    run.put("config: resolved JSON (values and parsed objects)", ALL)
    toml_ok = [i for i, t in enumerate(_texts()) if _fits_toml(t)]
    for i in toml_ok:
        (run_dir / "configs" / f"planted_{i}.toml").write_text(SPELLINGS[i].text + "\n")
    run.put("config: TOML file as written", toml_ok)
    notes = "".join(f"note_{i} = {json.dumps(t, ensure_ascii=False)}\n" for i, t in enumerate(_texts()))
    (run_dir / "configs" / "planted_strings.toml").write_text("[planted]\n" + notes)
    assert tomllib.loads((run_dir / "configs" / "planted_strings.toml").read_text())
    run.put("config: TOML string values", ALL)
    (run_dir / "configs" / "command.txt").write_text(
        "uv run rl @ configs/rl.toml " + " ".join(t for t in _texts() if "\n" not in t) + "\n"
        + "".join(t + "\n" for t in _texts()))
    run.put("config: command.txt", ALL)
    env_log = run_dir / "logs" / "attempt_1" / "envs" / "train" / "reverse-text.log"
    env_log.parent.mkdir(parents=True)
    env_log.touch()
    for name in ("orchestrator.log", "trainer.log", "inference.log", "envs/train/reverse-text.log"):
        with open(run_dir / "logs" / "attempt_1" / name, "a") as f:
            f.write(_log_lines("\x1b[2m14:23:20\x1b[0m \x1b[1m   INFO\x1b[0m ", "planted"))
    run.put("logs: orchestrator/trainer/inference/env server lines", ALL)
    (run_dir / "reports").mkdir()
    (run_dir / "reports" / "planted.md").write_text(_markdown())
    run.put("report Markdown", ALL)
    _plant_traces(run_dir, run)
    _touch_old(run_dir)
    return run


def _plant_traces(run_dir: Path, run: PlantedRun) -> None:
    """The first episode of each traces file: every spelling in the model output, its reasoning,
    a tool call's arguments, the tool result, the task prompt and the episode's errors."""
    texts = _texts()
    joined = "\n".join(texts)
    for path in sorted(run_dir.glob("rollouts/step_*/*/*/traces.jsonl")):
        lines = [x for x in path.read_text().split("\n") if x.strip()]
        rec = json.loads(lines[0])
        trace = rec["traces"][0]
        nodes = trace["nodes"]
        assistant = next(n for n in nodes if n["message"]["role"] == "assistant")
        assistant["message"]["content"] = MARK + " Here is what I found:\n" + joined
        assistant["message"]["reasoning_content"] = "Thinking about " + joined
        assistant["message"]["tool_calls"] = [
            {"id": f"call_{i}", "type": "function",
             "function": {"name": "bash", "arguments": json.dumps({"command": f"echo {t}"})}} for i, t in enumerate(texts)]
        last = len(nodes) - 1
        nodes.extend({"parent": last + k, "semantic_parents": [], "sampled": False, "timestamp": assistant.get("timestamp"),
                      "message": {"role": "tool", "tool_call_id": f"call_{k}", "content": f"output: {t}"},
                      "token_ids": [], "mask": [], "is_content": [], "logprobs": []}
                     for k, t in enumerate(texts))
        user = next(n for n in nodes if n["message"]["role"] == "user")
        user["message"]["content"] += "\n" + joined
        rec["task"]["data"]["prompt"] = joined
        rec["ok"] = False
        rec["errors"] = [{"type": "AuthenticationError", "message": t} for t in texts]
        trace["errors"] = [{"type": "ToolError", "message": t} for t in texts]
        lines[0] = json.dumps(rec)
        path.write_text("\n".join(lines) + "\n")
    run.put("episode: model output, reasoning, tool calls, tool results, prompt, errors", ALL)


# verl ---------------------------------------------------------------------------------------------
def _config_print(prefix: str) -> str:
    """A verl resolved-config print (pprint of a Python dict, Ray-prefixed) holding every spelling."""
    planted = {f"note_{i}": t for i, t in enumerate(_texts())}
    planted.update({f"parsed_{i}": v for i, t in enumerate(_texts()) if (v := _as_literal(t)) is not None})
    value = {"actor_rollout_ref": {"model": {"path": "Qwen/Qwen2.5-0.5B"}}, "planted": planted,
             "trainer": {"project_name": "dumps", "experiment_name": "grpo-dumps"}}
    return "".join(prefix + line + "\n" for line in pprint.pformat(value, width=100).splitlines())


def plant_verl(out: Path) -> PlantedRun:
    folder = out / "verl-planted"
    folder.mkdir()
    src = DATA / "verl-dumps"
    shutil.copytree(src / "generations", folder / "generations")
    log = folder / "grpo-dumps.log"
    run = PlantedRun("verl", log)
    head, *rest = (src / "grpo-dumps.log").read_text().splitlines(keepends=True)
    one_line = [t for t in _texts() if "\n" not in t]
    prefix = "\x1b[36m(TaskRunner pid=4242)\x1b[0m "
    log.write_text(head.rstrip("\n") + " " + " ".join(one_line) + "\n" + _config_print(prefix) + "".join(rest)
                   + _log_lines(prefix, "planted"))
    run.put("config: launch command overrides (one-line spellings)", [i for i, t in enumerate(_texts()) if "\n" not in t])
    run.put("config: resolved config print", ALL)
    run.put("logs: console lines", ALL)
    joined = "\n".join(_texts())
    for path in sorted((folder / "generations").rglob("*.jsonl")):
        head, rest = path.read_text().split("\n", 1)  # (the rest as written: a cut-off last line stays)
        row = json.loads(head)
        row["input"] += joined
        row["output"] = MARK + " I found " + joined + "\n#### 18"
        row["gts"] = joined
        path.write_text(json.dumps(row) + "\n" + rest)
    run.put("dumps: input, output, ground truth", ALL)
    _touch_old(folder)
    return run


def plant_verl_overrides(out: Path) -> PlantedRun:
    """A verl log with no config print: its config is the launch command's overrides, where the
    one-line spellings stand as written and as quoted Hydra overrides."""
    folder = out / "verl-overrides"
    folder.mkdir()
    log = folder / "overrides-only.log"
    run = PlantedRun("verl", log)
    one = [(i, t) for i, t in enumerate(_texts()) if "\n" not in t]
    head, *rest = (DATA / "verl-dumps" / "grpo-dumps.log").read_text().splitlines(keepends=True)
    log.write_text(head.rstrip("\n") + " " + " ".join(t for _i, t in one) + " "
                   + " ".join(f"+planted.note_{i}={shlex.quote(t)}" for i, t in one) + "\n"
                   + "".join(x for x in rest if "Dumped generations" not in x))
    run.put("config: launch command (as written, and as Hydra overrides)", [i for i, _t in one])
    _touch_old(folder)
    return run


# SWE-Lego-RL ----------------------------------------------------------------------------------------
def plant_lego(out: Path) -> PlantedRun:
    folder = out / "lego-planted"
    shutil.copytree(LEGO, folder, symlinks=True)
    log = folder / "logs" / LEGO_LOG
    run = PlantedRun("swe-lego-rl", log)
    lines = log.read_text().splitlines(keepends=True)
    at = next(i for i, x in enumerate(lines) if "'clip_ratio_low'" in x)
    prefix, body = lines[at].split("'clip_ratio_low'")
    planted = [f"{prefix}'planted_{i}': {t!r},\n" for i, t in enumerate(_texts())]
    ray = "\x1b[36m(AgentLoopWorker pid=1247359, ip=10.0.3.11)\x1b[0m "
    lines[at + 1:at + 1] = planted
    log.write_text("".join(lines) + _log_lines(ray, "[response]"))
    run.put("config: resolved config print", ALL)
    run.put("logs: console lines", ALL)
    texts, joined = _texts(), "\n".join(_texts())
    trials = sorted(p.parent for p in folder.rglob("result.json"))
    for trial in trials:
        result = json.loads((trial / "result.json").read_text())
        result["exception_info"] = {"exception_type": "AuthenticationError", "exception_message": joined,
                                    "exception_traceback": "Traceback (most recent call last):\n" + joined}
        (trial / "result.json").write_text(json.dumps(result, indent=4))
        if (trial / "exception.txt").exists():
            (trial / "exception.txt").write_text("Traceback (most recent call last):\n" + joined
                                                  + "\nopenai.AuthenticationError: " + texts[0].replace("\n", " ") + "\n")
        traj = trial / "agent" / "trajectory.json"
        if traj.exists():
            value = json.loads(traj.read_text())
            for step in value["steps"]:
                if step.get("source") == "agent":
                    step["message"] = MARK + " Found: " + joined
                    step["reasoning_content"] = "Think: " + joined
                    step["tool_calls"] = [{"tool_call_id": f"c{i}", "function_name": "execute_bash",
                                           "arguments": {"command": f"echo {t}"}} for i, t in enumerate(texts)]
                    step["observation"] = {"results": [{"source_call_id": f"c{i}", "content": t}
                                                       for i, t in enumerate(texts)]}
                elif step.get("source") == "user":
                    step["message"] += "\n" + joined
            traj.write_text(json.dumps(value, indent=2))
        if (trial / "trial.log").exists():
            with open(trial / "trial.log", "a") as f:
                f.write(joined + "\n")
    run.put("trials: exception message and traceback, exception.txt", ALL)
    run.put("trials: agent messages, reasoning, tool calls, tool results, user prompt", ALL)
    _touch_old(folder)
    return run


# Relax ----------------------------------------------------------------------------------------------
def plant_relax(out: Path) -> PlantedRun:
    save = out / "relax-planted"
    shutil.copytree(DATA / "relax" / "relax-run", save)
    run = PlantedRun("relax", save)
    joined = "\n".join(_texts())
    for path in sorted((save / "rollout_result").rglob("*.jsonl")):
        rows = [json.loads(x) for x in path.read_text().split("\n") if x.strip()]
        rows[0]["prompt"] = rows[0]["prompt"] + joined
        rows[0]["response"] = MARK + " Answer: " + joined
        rows[0]["label"] = joined
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run.put("samples: prompt, response, label", ALL)
    _touch_old(save)
    return run


# TensorBoard ----------------------------------------------------------------------------------------
def plant_tensorboard(out: Path) -> PlantedRun:
    """A verl-style TensorBoard run (the demo writer's), and one more launch writing every spelling as
    a text summary (its config text) and as hparams string values (its config), as
    `SummaryWriter.add_text` / `add_hparams` write them."""
    from tensorboardX.summary import hparams, text

    from rundash_core.sources.tensorboard.demo_run import _File, write_tensorboard_run

    folder = write_tensorboard_run(out, project="planted-project", name="tensorboard-planted", t_end=OLD - 7200)
    f = _File(folder, OLD - 3600)
    for i, t in enumerate(_texts()):
        f.summary(text(f"note_{i}", t), 0, OLD - 3600 + i)
    hp = _File(folder / "planted-hparams", OLD - 3500)
    for summary in hparams({f"note_{i}": t for i, t in enumerate(_texts())}, {}):
        hp.summary(summary, 0, OLD - 3500)
    hp.close()
    f.close()
    run = PlantedRun("tensorboard", folder)
    run.put("text summaries", ALL)
    run.put("hparams", ALL)
    _touch_old(folder)
    return run


# W&B ------------------------------------------------------------------------------------------------
def plant_wandb(out: Path) -> PlantedRun:
    """A W&B run (the demo writer's records) whose config holds every spelling as a string value and
    those that parse as JSON as themselves, its display name and history strings too (not metrics)."""
    from rundash_core.sources.wandb import demo_run, log

    pb = log.wandb_proto()
    start = OLD - 7200
    payloads = [demo_run.run_record(pb, "plant0w1", project="planted-project", name="wandb-planted",
                                    config={**demo_run.config(), **_structured()}, start=start)]
    for step in range(1, 6):
        values = {**demo_run.step_values(step, 1), **({f"text_{i}": t for i, t in enumerate(_texts())} if step == 1 else {})}
        payloads.append(demo_run.history_record(pb, values, step, start + 60 * step, 60.0 * step))
    payloads.append(demo_run.exit_record(pb, 0, 360.0))
    folder = out / "wandb" / demo_run.folder_name("plant0w1", start)
    demo_run.write_attempt(folder, "plant0w1", payloads)
    run = PlantedRun("wandb", folder)
    run.put("config values", ALL)
    run.put("history strings", ALL)
    _touch_old(out / "wandb")
    return run


def plant(out: Path) -> dict[str, PlantedRun]:
    """One planted run of each kind (and a verl run configured by its command line only) under
    `out` (a tracked folder), by path."""
    out.mkdir(parents=True, exist_ok=True)
    runs = [plant_prime(out), plant_verl(out), plant_verl_overrides(out), plant_lego(out), plant_relax(out),
            plant_tensorboard(out), plant_wandb(out)]
    return {str(r.path): r for r in runs}
