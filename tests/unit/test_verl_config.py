"""The config of a verl console log in every shape real logs give it (`io.verl_text`,
`io.verl_overrides`): a pprint dict with values that are not Python literals, a print cut off by
the console, Hydra overrides on the launch command line (set -x traces, markdown preambles,
backslash continuations, `export`ed variables), and text nothing of which parses. Each is shown
(`run.configs()` is never empty), and the run card's model, name and step total come from the
overrides when the log has no config print. Logs are built in tmp_path (spec shapes, synthetic)."""
from __future__ import annotations

import math
import os
from pathlib import Path

import pytest

import rundash_core as rd
from rundash_core.sources.verl import ends as verl_ends
from rundash_core.sources.verl import overview as verl_overview
from rundash_core.sources.verl.config_text import read_print, recover, tolerant
from rundash_core.sources.verl.overrides import HEAD_BYTES, head_config, parse_value

from helpers import DATA, write_file

DATA = DATA / "verl"
P = "\x1b[36m(TaskRunner pid=1247282)\x1b[0m "  # a Ray prefix, as the driver prints it
METRICS = "".join(f"{P}step:{s} - critic/score/mean:0.{s} - actor/pg_loss:-0.01\n" for s in (1, 2, 3))


def open_log(tmp_path: Path, text: str, name: str = "run.log"):
    return rd.open_run(write_file(tmp_path / name, text, mtime=None))


def pprinted(lines: list[str]) -> str:
    """Lines of a multi-line pprint, each with the driver's Ray prefix."""
    return "".join(P + line + "\n" for line in lines)


def whats(run) -> list[str]:
    return [p.what for p in run.problems()]


# A print whose values are not all Python literals --------------------------------------------------
ODD_PRINT = pprinted([
    "{'actor_rollout_ref': {'actor': {'loss_mode': <LossMode.GSPO: 'gspo'>,",
    "                                 'optim': {'lr': np.float64(1e-06), 'warmup': np.int64(3)},",
    "                                 'dtype': torch.bfloat16,",
    "                                 'hook': <function make_hook.<locals>.hook at 0x7f3a2c1d5e50>,",
    "                                 'tokenizer': <transformers.PreTrainedTokenizerFast object at 0x7f3a>},",
    "                       'model': {'path': 'Qwen/Qwen2.5-7B-Instruct',",
    "                                 'cache_dir': PosixPath('/data/hf cache'),",
    "                                 'override_config': DictConfig({'attn': 'flash', 'n': ListConfig([1, 2])}),",
    "                                 'target_modules': ListConfig(['q_proj', 'v_proj'])}},",
    " 'algorithm': {'adv_estimator': <AdvantageEstimator.GRPO: 'grpo'>, 'kl': {'coef': inf, 'seen': {1, 2}}},",
    " 'trainer': {'experiment_name': 'odd-values', 'total_training_steps': 3, 'logger': ['console']}}",
])


def test_non_literal_values_are_kept_as_their_text(tmp_path):
    run = open_log(tmp_path, ODD_PRINT + METRICS)
    cfg = run.config()
    actor = cfg["actor_rollout_ref"]["actor"]
    assert actor["loss_mode"] == "<LossMode.GSPO: 'gspo'>"  # an enum repr: its text
    assert actor["optim"] == {"lr": 1e-06, "warmup": 3}  # numpy scalars unwrapped
    assert actor["dtype"] == "torch.bfloat16"
    assert actor["hook"] == "<function make_hook.<locals>.hook at 0x7f3a2c1d5e50>"
    assert actor["tokenizer"] == "<transformers.PreTrainedTokenizerFast object at 0x7f3a>"
    model = cfg["actor_rollout_ref"]["model"]
    assert model["cache_dir"] == "/data/hf cache"  # a Path: its string
    assert model["override_config"] == {"attn": "flash", "n": [1, 2]}  # OmegaConf wrappers: their content
    assert model["target_modules"] == ["q_proj", "v_proj"]
    assert cfg["algorithm"] == {"adv_estimator": "<AdvantageEstimator.GRPO: 'grpo'>",
                                "kl": {"coef": math.inf, "seen": [1, 2]}}
    assert run.configs() == {"config (from log)": cfg}
    assert whats(run) == []  # read whole: nothing to report
    ov = run.overview()
    assert (ov.model, ov.experiment, ov.max_steps) == ("Qwen/Qwen2.5-7B-Instruct", "odd-values", 3)


def test_tolerant_reading_of_single_values():
    cases = {
        "{'a': <object object at 0x7f00>}": {"a": "<object object at 0x7f00>"},
        "{'a': <Enum.X: 'has > inside'>}": {"a": "<Enum.X: 'has > inside'>"},
        "{'a': WindowsPath('C:/m')}": {"a": "C:/m"},
        "{'a': DictConfig(content={'b': None})}": {"a": {"b": None}},
        "{'a': np.float32(2.5), 'b': -inf, 'c': b'x', 'd': (1, 2), 'e': ...}": {
            "a": 2.5, "b": -math.inf, "c": "x", "d": [1, 2], "e": "..."},
        "{'a': OrderedDict([('k', 1)]), 'b': set()}": {"a": "OrderedDict([('k', 1)])", "b": "set()"},
        "{<Key.A: 1>: 1}": {"<Key.A: 1>": 1},
    }
    for text, want in cases.items():
        got = read_print(text)
        assert (got.kind, got.partial, got.error, got.value) == ("print", False, None, want), text
    assert math.isnan(read_print("{'a': np.float64(nan)}").value["a"])
    assert tolerant("{'a': Foo(1, [2,") == ("{'a': ", True)  # a call that never closes: cut before it


# A print cut off by the console ---------------------------------------------------------------------
CUT_LINES = [
    "{'actor_rollout_ref': {'actor': {'clip_ratio': 0.2,",
    "                                 'optim': {'lr': 1e-06},",
    "                                 'ppo_epochs': 1},",
    "                       'model': {'path': 'Qwen/Qwen2.5-0.5B-Instruct',",
    "                                 'use_remove_padding': True,",
    "                                 'external_lib': Non",  # the console stopped here
]


def test_a_cut_off_print_is_read_up_to_its_last_complete_item(tmp_path):
    run = open_log(tmp_path, pprinted(CUT_LINES) + METRICS)  # same-source metric lines follow: not part of it
    files = run.configs()
    assert list(files) == ["config (from log, partial)", "config (raw text from log)"]
    assert files["config (from log, partial)"] == {"actor_rollout_ref": {
        "actor": {"clip_ratio": 0.2, "optim": {"lr": 1e-06}, "ppo_epochs": 1},
        "model": {"path": "Qwen/Qwen2.5-0.5B-Instruct", "use_remove_padding": True}}}
    assert files["config (raw text from log)"].splitlines()[-1].endswith("'external_lib': Non")
    assert "step:" not in files["config (raw text from log)"]
    (note,) = [w for w in whats(run) if "config" in w]
    assert "cut off" in note and "as far as it parses (5 of its 6 lines)" in note
    assert run.config() == {}  # no print read whole, no command line
    assert run.overview().model == "Qwen/Qwen2.5-0.5B-Instruct"  # the card's byte search of the print finds it


def test_a_print_cut_at_the_end_of_the_file_drops_its_last_partial_line():
    text = "\n".join(CUT_LINES[:4]) + "\n" + "                                 'use_remove_padding': Tr"
    got = read_print(text, cut=True, whole=False)
    assert got.partial and got.value == {"actor_rollout_ref": {
        "actor": {"clip_ratio": 0.2, "optim": {"lr": 1e-06}, "ppo_epochs": 1},
        "model": {"path": "Qwen/Qwen2.5-0.5B-Instruct"}}}
    # a one-line print cut mid-line keeps its complete items; a number at the cut could be cut too
    assert recover("{'data': {'a': 1, 'b': [1, 2, 3", whole=False)[0] == {"data": {"a": 1, "b": [1, 2]}}
    assert recover("{'data': {'a': 1, 'b': 'abc", whole=False)[0] == {"data": {"a": 1}}
    # a last line read to its newline counts when it ends as a complete pprint line does
    assert recover("{'data': {'a': 1},\n 'model': {'x': 2},", whole=True)[0] == {"data": {"a": 1}, "model": {"x": 2}}
    assert recover("{'data': {'a': 1},\n 'model': {'x': 2", whole=True)[0] == {"data": {"a": 1}}


def test_a_cut_one_line_sft_print(tmp_path):
    line = ("{'data': {'train_batch_size': 128, 'micro_batch_size': 4}, "
            "'model': {'partial_pretrain': 'google/gemma-2-2b-it', 'ext")
    run = open_log(tmp_path, line + "\nstep:0 - train/loss:0.046 - train/lr(1e-3):0.002\n")
    assert run.configs()["config (from log, partial)"] == {
        "data": {"train_batch_size": 128, "micro_batch_size": 4}, "model": {"partial_pretrain": "google/gemma-2-2b-it"}}


# Nothing parses ----------------------------------------------------------------------------------
def test_an_unparseable_print_is_shown_as_raw_text_with_a_note(tmp_path):
    garbage = pprinted(["{'actor_rollout_ref': %% not python @@ {{", "  ]] still not }}}"])
    run = open_log(tmp_path, garbage + METRICS)
    files = run.configs()
    assert list(files) == ["config (raw text from log)"]
    assert files["config (raw text from log)"] == "{'actor_rollout_ref': %% not python @@ {{\n  ]] still not }}}"
    (note,) = [w for w in whats(run) if "config" in w]
    assert "shown as raw text" in note
    assert run.config() == {}
    (cp,) = run.config_prints()
    assert cp.kind == "raw" and cp.value == {"raw config text (not parsed)": files["config (raw text from log)"]}


# Hydra overrides on the command line ----------------------------------------------------------------
TRACE = (
    "++ MODEL_PATH=deepseek-ai/deepseek-llm-7b-chat\n"
    "++ train_files='['\\''/d/gsm8k/train.parquet'\\'', '\\''/d/math/train.parquet'\\'']'\n"
    "++ python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo "
    "'data.train_files=['\\''/d/gsm8k/train.parquet'\\'', '\\''/d/math/train.parquet'\\'']' "
    "data.train_batch_size=1024 actor_rollout_ref.actor.optim.lr=1e-6 actor_rollout_ref.model.use_remove_padding=True "
    "+actor_rollout_ref.actor.extra=1 ++trainer.val_before_train=false 'trainer.logger=[console,wandb]' "
    "actor_rollout_ref.model.path=deepseek-ai/deepseek-llm-7b-chat trainer.experiment_name=ds7b-grpo "
    "trainer.total_training_steps=3 actor_rollout_ref.rollout.stop=null 'trainer.note=two words' "
    "'~critic.model' trainer.experiment_name=ds7b-grpo-final 2>&1 | tee run.log\n"
    "2025-06-18 16:49:37,706\tINFO worker.py:1843 -- Connected to Ray cluster.\n"
    "(WorkerDict pid=2) model.path=ignored: not a launch command\n"
)


def test_overrides_of_a_set_x_trace_are_the_config_and_the_card(tmp_path):
    run = open_log(tmp_path, TRACE + METRICS)
    want = {
        "algorithm": {"adv_estimator": "grpo"},
        "data": {"train_files": ["/d/gsm8k/train.parquet", "/d/math/train.parquet"], "train_batch_size": 1024},
        "actor_rollout_ref": {"actor": {"optim": {"lr": 1e-06}, "extra": 1},
                              "model": {"use_remove_padding": True, "path": "deepseek-ai/deepseek-llm-7b-chat"},
                              "rollout": {"stop": None}},
        "trainer": {"val_before_train": False, "logger": ["console", "wandb"], "experiment_name": "ds7b-grpo-final",
                    "total_training_steps": 3, "note": "two words"},
    }
    assert run.config() == want  # later overrides win; `~key` deletions and what follows `|` are not values
    files = run.configs()
    assert files["overrides (command line)"] == want
    assert files["shell variables (log head)"] == {
        "MODEL_PATH": "deepseek-ai/deepseek-llm-7b-chat",
        "train_files": "['/d/gsm8k/train.parquet', '/d/math/train.parquet']"}
    assert whats(run) == []
    ov = run.overview()
    assert (ov.model, ov.experiment, ov.max_steps, ov.flavor) == (
        "deepseek-ai/deepseek-llm-7b-chat", "ds7b-grpo-final", 3, "rl")


MARKDOWN = """# ~60 GB memory
commit:
d60f843

command:
```bash
export MODEL_PATH=/models/Qwen2.5-7B-Instruct
export PROJECT=verl-grpo EXP=qwen7b-math
python3 -m verl.trainer.main_ppo \\
    actor_rollout_ref.model.path=$MODEL_PATH \\
    trainer.project_name=${PROJECT} \\
    trainer.experiment_name="${EXP}-${SEED:-1}" \\
    trainer.default_local_dir=${CKPT_DIR:-ckpts}/${EXP} \\
    'data.val_files=[${HOME}/test.parquet]' \\
    data.max_prompt_length=512
```

env:
```bash
pip3 list | grep flash
flash_attn                        2.5.8
```
"""


def test_markdown_preamble_with_exports_and_continuation_lines(tmp_path):
    run = open_log(tmp_path, MARKDOWN + METRICS)
    assert run.configs() == {
        "overrides (command line)": {
            "actor_rollout_ref": {"model": {"path": "/models/Qwen2.5-7B-Instruct"}},
            "trainer": {"project_name": "verl-grpo", "experiment_name": "qwen7b-math-1",
                        "default_local_dir": "ckpts/qwen7b-math"},
            "data": {"val_files": ["${HOME}/test.parquet"], "max_prompt_length": 512}},  # unknown: as written
        "shell variables (log head)": {"MODEL_PATH": "/models/Qwen2.5-7B-Instruct", "PROJECT": "verl-grpo",
                                       "EXP": "qwen7b-math"},
    }
    ov = run.overview()
    assert (ov.model, ov.experiment) == ("Qwen2.5-7B-Instruct", "qwen7b-math-1")


def test_overrides_in_one_quoted_argument_and_an_sft_torchrun(tmp_path):
    log = ('command:\nbash run_gemma.sh "trainer.n_gpus_per_node=1 trainer.logger=[\'console\'] '
           'critic.model.path=Qwen/Qwen2.5-0.5B-Instruct actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct"\n\n')
    run = open_log(tmp_path, log + METRICS, "ppo.log")
    assert run.config() == {"trainer": {"n_gpus_per_node": 1, "logger": ["console"]},
                            "critic": {"model": {"path": "Qwen/Qwen2.5-0.5B-Instruct"}},
                            "actor_rollout_ref": {"model": {"path": "Qwen/Qwen2.5-0.5B-Instruct"}}}
    sft = ("+ nproc_per_node=2\n+ torchrun --standalone --nnodes=1 --nproc_per_node=2 -m verl.trainer.fsdp_sft_trainer "
           "'+data.prompt_dict_keys=[question]' model.partial_pretrain=google/gemma-2b-it "
           "trainer.total_epochs=2 model.partial_pretrain=google/gemma-2-2b-it\n"
           "step:0 - train/loss:0.046 - train/lr(1e-3):0.002\nstep:1 - train/loss:0.040 - train/lr(1e-3):0.002\n")
    run = open_log(tmp_path, sft, "sft.log")
    assert run.config() == {"data": {"prompt_dict_keys": ["question"]},
                            "model": {"partial_pretrain": "google/gemma-2-2b-it"}, "trainer": {"total_epochs": 2}}
    assert run.configs()["shell variables (log head)"] == {"nproc_per_node": "2"}
    ov = run.overview()
    assert (ov.model, ov.flavor) == ("google/gemma-2-2b-it", "sft")


def test_model_from_an_exported_variable_alone(tmp_path):
    run = open_log(tmp_path, "+ export MODEL_PATH=/ckpt/hub/models--deepseek-ai--deepseek-llm-7b-chat/snapshots/ab12\n"
                             "+ export CUDA_VISIBLE_DEVICES=0,1\n" + METRICS)
    assert run.configs() == {"shell variables (log head)": {
        "MODEL_PATH": "/ckpt/hub/models--deepseek-ai--deepseek-llm-7b-chat/snapshots/ab12",
        "CUDA_VISIBLE_DEVICES": "0,1"}}
    assert run.config() == {}
    assert run.overview().model == "deepseek-ai/deepseek-llm-7b-chat"


def test_a_cut_print_and_overrides_are_both_shown(tmp_path):
    run = open_log(tmp_path, TRACE + pprinted(CUT_LINES) + METRICS)
    files = run.configs()
    assert list(files) == ["config (from log, partial)", "config (raw text from log)", "overrides (command line)",
                           "shell variables (log head)"]
    assert run.config() == files["overrides (command line)"]  # no print read whole: the overrides
    ov = run.overview()  # the cut print names no experiment: the command line does
    assert (ov.experiment, ov.max_steps, ov.model) == ("ds7b-grpo-final", 3, "Qwen/Qwen2.5-0.5B-Instruct")  # the print's


def test_a_whole_print_is_the_config_even_with_a_command_line(tmp_path):
    run = open_log(tmp_path, TRACE + ODD_PRINT + METRICS)
    assert list(run.configs()) == ["config (from log)"]
    assert run.config()["trainer"]["experiment_name"] == "odd-values"
    assert run.overview().experiment == "odd-values"


def test_no_config_anywhere_is_still_no_config(tmp_path):
    run = open_log(tmp_path, "2025-06-18 16:49:37,706\tINFO worker.py:1843 -- a=b c.d = e\n" + METRICS)
    assert run.configs() == {} and run.config() == {}
    assert run.overview().model is None


# The real logs ------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["dq_math.log", "eh_Qwen2.5-0.5B-bsz256_2-prompt1024-resp512-0.567.log",
                                  "eh_gemma-2-2b-it-sft-0.411.log"])
def test_real_logs_keep_their_print_and_their_command_lines_agree(name):
    run = rd.open_run(DATA / name)
    cfg = run.config()
    assert run.configs() == {"config (from log)": cfg} and not [w for w in whats(run) if "config" in w]
    head = head_config((DATA / name).read_bytes()[:HEAD_BYTES], complete=False)
    assert head.overrides  # each also shows its launch command

    def flat(d, pre=""):
        for k, v in d.items():
            yield from flat(v, f"{pre}{k}.") if isinstance(v, dict) and v else [(pre + k, v)]

    differ = {}
    for key, value in flat(head.overrides):
        node = cfg
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if node != value:
            differ[key] = (value, node)
    # the SFT trainer divides micro_batch_size by the data-parallel size before printing
    # (its line 29, "Normalize batch size by dp 2")
    assert differ == ({"data.micro_batch_size": (8, 4)} if "sft" in name else {})


def test_real_log_heads_parse():
    dq = head_config((DATA / "dq_math.log").read_bytes()[:HEAD_BYTES], complete=False)
    assert dq.get("data.train_files") == ["/data/share8/ml/data/gsm8k/train.parquet",
                                          "/data/share8/ml/data/math/train.parquet"]
    assert dq.get("trainer.logger") == ["console", "wandb"] and dq.get("actor_rollout_ref.rollout.n") == 5
    gemma = head_config((DATA / "eh_gemma-2-2b-it-sft-0.411.log").read_bytes(), complete=True)
    assert gemma.get("model.partial_pretrain") == "google/gemma-2-2b-it" and gemma.sft  # the later override wins
    assert len(gemma.commands) == 2  # the preamble's command and the traced torchrun


# Cheap: the run card reads nothing more for the overrides --------------------------------------------
def _bytes_read(monkeypatch, path: Path) -> int:
    read = []
    real = os.pread

    def counting(fd, n, off):
        data = real(fd, n, off)
        read.append(len(data))
        return data

    monkeypatch.setattr(verl_ends.os, "pread", counting)
    verl_overview.read_overview_inputs(str(path))
    monkeypatch.setattr(verl_ends.os, "pread", real)
    return sum(read)


def test_the_card_searches_only_head_bytes_already_read(tmp_path, monkeypatch):
    filler = "".join(f"(WorkerDict pid=2) loading shard {i} of the model weights into memory\n" for i in range(30000))
    body = filler + METRICS * 100
    with_cmd = write_file(tmp_path / "with.log", TRACE + body, mtime=None)
    without = write_file(tmp_path / "without.log", "#" * (len(TRACE) - 1) + "\n" + body, mtime=None)
    assert os.path.getsize(with_cmd) == os.path.getsize(without) > 1 << 20
    assert _bytes_read(monkeypatch, with_cmd) == _bytes_read(monkeypatch, without)
    d = verl_overview.read_overview_inputs(str(with_cmd))
    assert (d.model, d.head.experiment, d.max_steps) == ("deepseek-ai/deepseek-llm-7b-chat", "ds7b-grpo-final", 3)
    # a command line beyond the head window is not looked for
    late = write_file(tmp_path / "late.log", "x" * 100 + "\n" + filler[: HEAD_BYTES + 1000] + TRACE + METRICS,
                      mtime=None)
    assert verl_overview.read_overview_inputs(str(late)).model is None


# Hydra values ---------------------------------------------------------------------------------------
def test_hydra_values():
    assert [parse_value(v) for v in ("1", "-2", "1e-6", "0.5", "inf", "true", "False", "null", "NULL", "abc")] == [
        1, -2, 1e-06, 0.5, math.inf, True, False, None, None, "abc"]
    assert parse_value("[a, 'b c', 3, [1,2], {k: v}]") == ["a", "b c", 3, [1, 2], {"k": "v"}]
    assert parse_value("{lr: 1e-6, sched: {name: cosine}}") == {"lr": 1e-06, "sched": {"name": "cosine"}}
    assert parse_value("[http://h:80/x, ${oc.env:A,b}]") == ["http://h:80/x", "${oc.env:A,b}"]
    assert parse_value("'quoted'") == "quoted" and parse_value("[unclosed") == "[unclosed"
    assert parse_value("a,b") == "a,b"  # a sweep is not a list
    head = head_config(b"export A=/x B=${A}/y\n"
                       b"python3 -m verl.trainer.main_ppo a.b=$B a.c=${oc.env:A} a.d=${oc.env:Z,dflt}\n")
    assert head.overrides == {"a": {"b": "/x/y", "c": "/x", "d": "dflt"}} and head.variables == {"A": "/x", "B": "/x/y"}
