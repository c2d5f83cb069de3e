"""The TensorBoard benchmark at a tiny scale: the generated file is valid for TensorBoard's own
loader, every contender measures what it says, the verification catches a wrong frame, and the
report renders."""
from __future__ import annotations

import pytest

pytest.importorskip("tensorboardX")
pytest.importorskip("tbparse")

from benchmarks import tensorboard_load as bench  # noqa: E402
from benchmarks.common import format_table  # noqa: E402

N = 3000
pytestmark = pytest.mark.filterwarnings("ignore:The inplace keyword")  # tbparse 0.0.9 under pandas 3.1


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    return bench.generate(str(tmp_path_factory.mktemp("tb")), N)


def test_the_generated_file_reads_whole_in_tensorboards_loader(generated):
    from tensorboard.backend.event_processing.event_file_loader import RawEventFileLoader

    records = list(RawEventFileLoader(generated.path).Load())  # checks both checksums of every record
    assert len(records) == N + 1 and generated.events == N


def test_contenders_count_every_record_and_the_frame_is_verified(generated):
    kw = {"run_dir": generated.run_dir, "path": generated.path}
    assert bench.measure("floor", **kw)["rows"] == N + 1
    assert bench.measure("fields", **kw)["rows"] == N == bench.measure("rundash", **kw)["rows"]
    assert bench.measure("tbparse", **kw)["rows"] == N
    v = bench.measure("verify", **kw)
    assert v["ok"] and v["rows"] == v["tbparse_rows"] == N


def test_refresh_reads_the_appended_events_and_the_report_renders(tmp_path):
    res = bench.results(N, keep_dir=str(tmp_path), repeat=1, in_process=True)
    table, checks = bench.rows(res)
    assert res["refresh"]["rows_added"] == res["refresh"]["appended"] == 5 * bench.APPEND
    assert checks["verified"] and checks["refresh_rows"] and checks["tbparse_over_rundash"] > 0
    text = format_table(bench.HEADERS, table)
    assert "tbparse.SummaryReader" in text and "Event.FromString" in text and text.splitlines()[-1].rstrip(" |").endswith("PASS")
