"""TensorBoard runs read by rundash equal what TensorBoard's own loader reads from the same files
(`tensorboard.backend.event_processing.event_file_loader`, its own protobuf classes, its own
CRC checks): the real samples (tests/data/tensorboard, tensorboardX 2.6.5) and runs written here
with tensorboardX (two launches into one folder with overlapping steps, NaN, inf, text, hparams,
scalar tensors, add_scalars). Torn, damaged, growing and freshly copied files follow."""
from __future__ import annotations

import math
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

import rundash_core as rd
from rundash_core import cache
from rundash_core.sources.tensorboard import run as tb_run

from helpers import DATA

tbx = pytest.importorskip("tensorboardX")
efl = pytest.importorskip("tensorboard.backend.event_processing.event_file_loader")
from tensorboard.util import tensor_util  # noqa: E402
from tensorboardX.proto.summary_pb2 import Summary, SummaryMetadata  # noqa: E402
from tensorboardX.proto.tensor_pb2 import TensorProto  # noqa: E402

SAMPLES = sorted(p for p in (DATA / "tensorboard" / "tensorboard_log").glob("*/*") if p.is_dir())
OLD = time.time() - 3 * 86400  # data three days old: a copy of it is not running


# The independent reader --------------------------------------------------------------------------
def reference(run_dir: Path) -> dict[tuple[str, int], tuple[float, float]]:
    """(metric, step) -> (value, wall time) by TensorBoard's loader: files of the folder and its
    sub-folders in order of their earliest wall time (then name), the last write winning; a
    sub-writer's tag named as the docs say (tensorboard spec 4.3)."""
    files = []
    for path in sorted(run_dir.rglob("*tfevents*")):
        events = list(efl.EventFileLoader(str(path)).Load())
        files.append((min((e.wall_time for e in events), default=math.inf), str(path.relative_to(run_dir)), events))
    out = {}
    for _first, rel, events in sorted(files, key=lambda f: (f[0] == math.inf, f[0], f[1])):
        sub = os.path.dirname(rel)
        for e in events:
            for v in e.summary.value:
                if v.metadata.plugin_data.plugin_name != "scalars":
                    continue
                name = v.tag if not sub else (sub if sub.startswith(v.tag + "/") else f"{v.tag}/{sub[len(v.tag) + 1:]}"
                                              if sub.startswith(v.tag.replace("/", "_") + "_") else f"{sub}/{v.tag}")
                out[(name, e.step)] = (float(tensor_util.make_ndarray(v.tensor).item()), e.wall_time)
    return out


def ours(run_dir: Path) -> dict[tuple[str, int], tuple[float, float]]:
    m = rd.open_run(run_dir).metrics()
    assert not m.duplicated(["metric", "step"]).any()
    return {(k, int(s)): (v, t) for k, s, v, t in zip(m["metric"].astype(str), m["step"], m["value"], m["time"])}


def same(a: dict, b: dict) -> bool:
    """Equal keys, values (NaN equal to NaN, float32 as logged) and wall times."""
    return a.keys() == b.keys() and all(
        (x[0] == y[0] or (math.isnan(x[0]) and math.isnan(y[0]))) and x[1] == y[1] for x, y in ((a[k], b[k]) for k in a))


def scalar_tensor(tag: str, value: float, how: str) -> Summary:
    """A scalar written as a tensor with the scalars plugin (TF2, PyTorch's new_style, newer writers)."""
    if how == "float_val":
        t = TensorProto(dtype=1, float_val=[value])
    elif how == "double_val":
        t = TensorProto(dtype=2, double_val=[value])
    else:
        t = TensorProto(dtype=1, tensor_content=np.float32(value).tobytes())
    meta = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="scalars"))
    return Summary(value=[Summary.Value(tag=tag, tensor=t, metadata=meta)])


@pytest.fixture(scope="module")
def launched(tmp_path_factory) -> Path:
    """Two launches of tensorboardX's SummaryWriter into one folder: the second resumes at step 6
    and logs 6..9 again; NaN, inf, a text summary, hparams, scalar tensors and add_scalars."""
    run = tmp_path_factory.mktemp("tb") / "tensorboard_log" / "proj" / "exp"
    for launch, steps in ((1, range(0, 10)), (2, range(6, 15))):
        w = tbx.SummaryWriter(str(run), filename_suffix=f".launch{launch}")
        w.add_text("config", f"launch {launch}: lr=1e-6\nmodel_name_or_path=Qwen/Qwen2.5-0.5B", 0, walltime=OLD + 1000 * launch)
        if launch == 1:
            w.add_hparams({"model_name_or_path": "Qwen/Qwen2.5-0.5B", "max_steps": 14, "lr": 1e-6}, {}, name="hp")
        for step in steps:
            wall = OLD + 1000 * launch + step
            w.add_scalar("train/loss", 1.0 / (step + 1) + launch, step, walltime=wall)
            w.add_scalar("train/reward", math.nan if step == 3 else math.inf if step == 4 else step * 0.1, step, walltime=wall)
            w.add_scalars("lengths", {"mean": step * 2.0, "max": step * 3.0}, step, walltime=wall)
            how = ("float_val", "double_val", "tensor_content")[step % 3]
            w._get_file_writer().add_summary(scalar_tensor("train/kl", step / 7, how), step, wall)
        w.close()
    return run


# Equal to TensorBoard's own reader ----------------------------------------------------------------
@pytest.mark.parametrize("run_dir", SAMPLES, ids=lambda p: p.name)
def test_samples_read_as_tensorboard_reads_them(run_dir):
    want = reference(run_dir)
    assert want and same(ours(run_dir), want)


def test_two_launches_read_as_tensorboard_reads_them(launched):
    got, want = ours(launched), reference(launched)
    assert same(got, want)
    assert got[("train/loss", 7)][0] == pytest.approx(1 / 8 + 2)  # the newest launch wins on steps 6..9
    assert got[("train/loss", 2)][0] == pytest.approx(1 / 3 + 1)
    assert math.isnan(got[("train/reward", 3)][0]) and got[("train/reward", 4)][0] == math.inf
    assert got[("train/kl", 14)][0] == pytest.approx(2.0, rel=1e-6)  # scalar tensors of all three forms
    assert {"lengths/mean", "lengths/max"} <= {k for k, _s in got}  # add_scalars' sub-writers


def test_attempts_config_and_card_of_two_launches(launched):
    run = rd.open_run(launched)
    assert run.kind == "tensorboard" and run.attempts() == [1, 2] and run.resume_steps() == [6]
    assert run.configs(1)["config"].startswith("launch 1") and run.configs()["config"].startswith("launch 2")
    assert run.config()["model_name_or_path"] == "Qwen/Qwen2.5-0.5B" and run.config()["max_steps"] == 14
    ov = run.overview()
    assert (ov.project, ov.experiment, ov.name) == ("proj", "exp", "exp")
    assert ov.model == "Qwen/Qwen2.5-0.5B" and ov.max_steps == 14 and ov.attempts == 2
    assert ov.step == 15 and ov.last_step == 14 and run.problems() == []  # steps 0..14: 15 steps done


def test_hf_layout_and_folders_of_runs(tmp_path):
    """HF Trainer's `<output_dir>/runs/<date>_<host>/`: the output dir is the project; a folder of
    only sub-folders with event files is no run, each sub-folder is one (and discovery lists them)."""
    out = tmp_path / "my-sft"
    for date in ("Dec01_10-00-00_node", "Dec02_10-00-00_node"):
        w = tbx.SummaryWriter(str(out / "runs" / date))
        w.add_scalar("train/loss", 1.0, 10, walltime=OLD)
        w.close()
    assert not tb_run.is_run_dir(str(out / "runs"))
    ov = rd.open_run(out / "runs" / "Dec02_10-00-00_node").overview()
    assert (ov.project, ov.experiment, ov.step) == ("my-sft", None, 10)
    found = rd.discover([str(tmp_path)])
    assert sorted(found["name"]) == ["Dec01_10-00-00_node", "Dec02_10-00-00_node"] and set(found["kind"]) == {"tensorboard"}


# Messy files ----------------------------------------------------------------------------------------
def _copy(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest, copy_function=shutil.copy)  # (fresh mtimes, as most copies get)
    return dest


def _set_mtime(folder: Path, t: float) -> None:
    for p in folder.rglob("*"):
        os.utime(p, (t, t))


@pytest.mark.parametrize("cut", [5, 20], ids=["mid-header", "mid-data"])
def test_torn_copy_keeps_what_is_whole_and_says_so_once_stopped(tmp_path, cut):
    src = SAMPLES[0]
    run = _copy(src, tmp_path / src.name)
    path = max(run.glob("*tfevents*"))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - cut])
    want = reference(run)  # TensorBoard's loader stops at the torn record too
    cache.shared.clear()
    assert same(ours(run), want)
    assert rd.open_run(run).overview().status == "running"  # just written: the writer may still flush the rest
    assert [p for p in rd.open_run(run).problems() if "cut off" in p.what] == []
    _set_mtime(run, time.time() - 3600)
    problems = rd.open_run(run).problems()
    assert [p.path for p in problems] == [str(path)] and "last record is cut off" in problems[0].what


def _records(path: Path) -> list[int]:
    """Header offsets of a file's records."""
    from rundash_core.sources.tensorboard.events import HEADER, frame

    return [start - HEADER for start in frame(path.read_bytes()).starts]


def test_a_damaged_header_stops_there_and_is_named(tmp_path):
    src = SAMPLES[0]
    run, cut = _copy(src, tmp_path / "run"), _copy(src, tmp_path / "cut")
    path = max(run.glob("*tfevents*"))
    at = _records(path)[40]
    data = bytearray(path.read_bytes())
    data[at + 1] ^= 0x01  # the length of record 40: framing can go no further
    path.write_bytes(bytes(data))
    (cut / path.name).write_bytes(bytes(data[:at]))  # what is before it
    assert same(ours(run), reference(cut))  # never raises; keeps everything before the damage
    problems = rd.open_run(run).problems()
    assert [p.path for p in problems] == [str(path)]
    assert f"record header at byte {at:,} fails its length checksum" in problems[0].what


@pytest.mark.parametrize("checksum", ["left", "rewritten"])
def test_a_record_with_bad_data_is_skipped_and_counted(tmp_path, checksum):
    """Zeroed bytes behind an intact header (stale blocks after a crash): with the old checksum they
    fail it; with a matching one they are no Event (field number 0). Skipped either way, and named."""
    import struct

    from rundash_core.sources.tensorboard.events import masked_crc32c

    src = SAMPLES[0]
    run = _copy(src, tmp_path / "run")
    path = max(run.glob("*tfevents*"))
    offsets = _records(path)
    data = bytearray(path.read_bytes())
    start, end = offsets[7] + 12, offsets[8] - 4
    data[start:end] = bytes(end - start)
    if checksum == "rewritten":
        data[end:end + 4] = struct.pack("<I", masked_crc32c(bytes(end - start)))
    path.write_bytes(bytes(data))
    got, want = ours(run), ours(src)
    assert len(got) == len(want) - 1 and set(got) < set(want)
    what = "records whose data fails its checksum" if checksum == "left" else "records that are not TensorBoard events"
    problems = rd.open_run(run).problems()
    assert [(p.what, p.count) for p in problems] == [(f"{what} (skipped; first at byte {offsets[7]:,})", 1)]


def test_reading_window_by_window_reads_the_same(launched, monkeypatch):
    from rundash_core.sources.tensorboard import event_file

    monkeypatch.setattr(event_file, "WINDOW", 333)  # records cut by every window's end, some longer than one
    cache.shared.clear()
    assert same(ours(launched), reference(launched))
    cache.shared.clear()


def test_no_damage_anywhere_raises(tmp_path):
    """Bytes flipped, zeroed or cut anywhere in a real file: every reader answers, never raises."""
    src = max(SAMPLES[0].glob("*tfevents*")).read_bytes()
    rng = np.random.default_rng(26)
    run = tmp_path / "run"
    run.mkdir()
    path = run / "events.out.tfevents.1.host"
    for i in range(60):
        data = bytearray(src)
        at = int(rng.integers(0, len(data)))
        if i % 3 == 0:
            data[at] ^= int(rng.integers(1, 256))
        elif i % 3 == 1:
            data[at:at + 64] = bytes(min(64, len(data) - at))
        else:
            del data[at:]
        path.write_bytes(bytes(data))
        cache.shared.clear()
        r = rd.open_run(run)
        assert len(r.metrics()) <= 949 and r.overview().name == "run"
        r.problems(), r.configs(), r.config(), r.attempts(), r.resume_steps()


def test_a_growing_file_is_read_by_its_appended_bytes(tmp_path):
    from tensorboardX.proto.event_pb2 import Event
    from tensorboardX.record_writer import RecordWriter
    from tensorboardX.summary import scalar

    from benchmarks.common import counted_reads

    run = tmp_path / "live"
    run.mkdir()
    path = run / "events.out.tfevents.1.host"
    w = RecordWriter(str(path))  # tensorboardX's own record writer, flushed record by record here

    def log(steps):
        for step in steps:
            w.write(Event(wall_time=time.time(), step=step, summary=scalar("train/loss", step * 0.5)).SerializeToString())
        w.flush()

    log(range(200))
    r = rd.open_run(run)
    assert len(r.metrics()) == 200
    size = path.stat().st_size
    log(range(200, 210))
    appended = path.stat().st_size - size
    with counted_reads(("rundash_core.io.files",)) as count:
        m = r.metrics()
    assert len(m) == 210 and m["value"].iloc[-1] == 209 * 0.5
    assert appended <= count.bytes <= appended + 64  # the appended records, and the last bytes read (unchanged?)
    assert r.overview().status == "running" and same(ours(run), reference(run))
    w.close()
    shutil.copy(path, path.with_suffix(".tmp"))
    os.replace(path.with_suffix(".tmp"), path)  # replaced by a copy (another inode): read again whole
    with counted_reads(("rundash_core.io.files",)) as count:
        assert len(r.metrics()) == 210
    assert count.bytes >= path.stat().st_size


def test_a_fresh_copy_of_an_old_run_is_not_running(tmp_path):
    from rundash_core.sources.tensorboard.demo_run import write_tensorboard_run

    now = time.time()
    live = write_tensorboard_run(tmp_path / "a", t_end=now - 5)
    _set_mtime(live, now - 5)
    assert rd.open_run(live).overview(now=now).status == "running"
    old = write_tensorboard_run(tmp_path / "b", t_end=now - 3 * 86400)
    copy = _copy(old, tmp_path / "copy")  # fresh mtimes
    ov = rd.open_run(copy).overview(now=now)
    assert ov.status == "completed" and ov.touched.timestamp() > now - 60
    assert ov.updated.timestamp() == pytest.approx(now - 3 * 86400, abs=2)


def test_the_demo_run_is_fast_deterministic_and_reads_as_tensorboard_does(tmp_path):
    from rundash_core.sources.tensorboard.demo_run import STEPS, write_tensorboard_run

    t = time.perf_counter()
    a = write_tensorboard_run(tmp_path / "a", t_end=1.8e9)
    assert time.perf_counter() - t < 0.5
    b = write_tensorboard_run(tmp_path / "b", t_end=1.8e9)
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    assert all((a / f).read_bytes() == (b / f).read_bytes() for f in files)
    assert same(ours(a), reference(a))
    run = rd.open_run(a)
    ov = run.overview()
    assert ov.step == STEPS and ov.attempts == 2 and ov.model and ov.eval_envs == ["openai/gsm8k"]
    assert run.configs(1)["hparams"]["trainer.total_training_steps"] == STEPS and "hparams" not in run.configs(2)
    assert {"critic/score/mean", "actor/entropy", "response_length/mean", "timing_s/step"} <= set(run.metrics()["metric"])


def test_without_tensorboardx_the_run_lists_with_one_problem(tmp_path):
    """tensorboardX hidden from the import system: no traceback, one Problem naming the install."""
    import subprocess
    import sys

    code = ("import sys; sys.modules['tensorboardX'] = None\n"
            "import rundash_core as rd\n"
            f"r = rd.open_run({str(SAMPLES[0])!r})\n"
            "print(len(r.metrics()), r.overview().name)\n"
            "print('|'.join(p.what for p in r.problems()))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[0] == f"0 {SAMPLES[0].name}" and out[1] == "reading TensorBoard event files needs the tensorboardX package: pip install tensorboardX"
