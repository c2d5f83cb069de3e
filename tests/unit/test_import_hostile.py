"""Hostile bundles against the importer (`safety/importer.py`) and the Import page: names with
control characters, clashes, depth, member caps, encryption, corrupt archives, headers claiming
gigabytes, two sessions importing at once. Each refusal is an `ImportRefused` with a message
(never another exception), and a refused bundle leaves nothing in the cache folder. (Ordinary
imports: test_import.py; hostile paths against the roots: test_roots.py.)"""
from __future__ import annotations

import gzip
import io
import os
import tarfile
import threading
import time
import zipfile
from pathlib import Path

import pytest

from rundash_core.safety import importer

from helpers import NEW_RUN, REPO, copy_run

APP = REPO / "app.py"


@pytest.fixture(autouse=True)
def _cache(monkeypatch, tmp_path):
    monkeypatch.setenv("RUNDASH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("RUNDASH_IMPORT_MAX_MB", raising=False)


def _zip(entries: list[tuple[str, bytes]]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in entries:
            zf.writestr(zipfile.ZipInfo(name), data)
    return buf.getvalue()


def _tar(entries: list[tuple[str | tarfile.TarInfo, bytes | None]], mode: str = "w:gz") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode, format=tarfile.PAX_FORMAT) as tar:
        for name, data in entries:
            info = tarfile.TarInfo(name) if isinstance(name, str) else name
            info.size = len(data or b"")
            tar.addfile(info, io.BytesIO(data) if data else None)
    return buf.getvalue()


def _tar_dir(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name.rstrip("/"))
    info.type = tarfile.DIRTYPE
    return info


def _refused(filename: str, data: bytes, match: str, tmp_path: Path, **kw) -> str:
    """The refusal's message; asserts nothing was left in the imports folder."""
    with pytest.raises(importer.ImportRefused, match=match) as refused:
        importer.import_bundle(filename, data, **kw)
    imports = tmp_path / "cache" / "imports"
    assert not imports.exists() or list(imports.iterdir()) == [], "half-extracted files left behind"
    return str(refused.value)


def test_names_with_control_characters_or_not_utf8_are_refused(tmp_path):
    for name in ["run/a\nb.jsonl", "run/\x1b[31mred", "run/bell\x07", "run/del\x7f"]:
        _refused("bad.zip", _zip([(name, b"x")]), "control character", tmp_path)
        _refused("bad.tar.gz", _tar([(name, b"x")]), "control character", tmp_path)
    _refused("bad.tar.gz", _tar([("run/caf\udce9", b"x")]), "not UTF-8", tmp_path)


@pytest.mark.filterwarnings("ignore:Duplicate name")  # (zipfile warns while the test writes one)
def test_a_name_given_twice_or_both_file_and_folder_is_refused_with_a_message(tmp_path):
    cases = [[("run/a", b"1"), ("run/a/b", b"2")],  # a file, then a folder of the same name
             [("run/a/", b""), ("run/a", b"2")],  # a folder, then a file
             [("run/a", b"1"), ("run/a", b"2")]]  # twice: which one would the snapshot hold?
    for entries in cases:
        _refused("bad.zip", _zip(entries), "named twice|which is a file", tmp_path)
        _refused("bad.tar.gz", _tar([(_tar_dir(n) if n.endswith("/") else n, d) for n, d in entries]),
                 "named twice|which is a file", tmp_path)
    _refused("bad.zip", _zip([(".", b"x")]), "not a file name", tmp_path)


def test_deeply_nested_or_over_long_names_are_refused_not_crashed(tmp_path):
    deep = "a/" * 3000 + "x"  # beyond PATH_MAX (an OSError) and os.makedirs' recursion (a RecursionError)
    _refused("deep.zip", _zip([(deep, b"x")]), "folders deep", tmp_path)
    _refused("deep.tar.gz", _tar([(deep, b"x")]), "folders deep", tmp_path)
    _refused("long.zip", _zip([("run/" + "n" * 300, b"x")]), "too long", tmp_path)
    _refused("long.tar.gz", _tar([("run/" + "n" * 300, b"x")]), "too long", tmp_path)
    ok = "/".join(["d"] * (importer.MAX_DEPTH - 1)) + "/metrics.jsonl"  # as deep as allowed: imported
    folder = importer.import_bundle("ok.zip", _zip([(ok, b"{}\n")]))
    assert (folder / ok).read_bytes() == b"{}\n"


def test_thousands_of_tiny_members_are_refused_by_a_member_cap(tmp_path):
    many = [(f"run/f{i}", b"") for i in range(importer.MAX_MEMBERS + 1)]
    message = _refused("many.zip", _zip(many), "more than", tmp_path)
    assert str(importer.MAX_MEMBERS) in message
    _refused("many.tar.gz", _tar(many), "more than", tmp_path)
    folder = importer.import_bundle("fine.zip", _zip(many[:50]))
    assert len(list((folder / "run").iterdir())) == 50


def _encrypted(zipped: bytes) -> bytes:
    data = bytearray(zipped)
    for signature, flags_at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):  # the "encrypted" flag bit
        data[data.find(signature) + flags_at] |= 0x1
    return bytes(data)


def test_an_encrypted_zip_member_is_refused_with_a_message(tmp_path):
    _refused("locked.zip", _encrypted(_zip([("run/metrics.jsonl", b"{}\n")])), "encrypted", tmp_path)


def test_a_zip_with_corrupt_offsets_or_an_unknown_version_is_refused_with_a_message(tmp_path):
    good = _zip([("run/metrics.jsonl", b"{}\n" * 100)])
    end = good.rfind(b"PK\x05\x06")
    offset = int.from_bytes(good[end + 16:end + 20], "little")
    shifted = good[:end + 16] + (offset + 1000).to_bytes(4, "little") + good[end + 20:]  # "negative seek value"
    _refused("shifted.zip", shifted, "not a readable zip", tmp_path)
    central = good.find(b"PK\x01\x02")
    future = bytearray(good)
    future[central + 6] = 80  # needs zip version 8.0 to extract
    _refused("future.zip", bytes(future), "not a readable zip", tmp_path)


def test_a_truncated_or_corrupt_tar_gz_is_refused_not_imported_with_wrong_bytes(tmp_path):
    raw = _tar([("run/metrics.jsonl", os.urandom(40_000))], mode="w")
    packed = gzip.compress(raw)
    _refused("cut.tar.gz", packed[:-6], "truncated or corrupt", tmp_path)  # the length/CRC trailer cut off
    flipped = bytearray(packed)
    flipped[len(flipped) // 2] ^= 0xFF  # one bit of the content changed: only the CRC tells
    _refused("flipped.tar.gz", bytes(flipped), "truncated or corrupt|not a readable", tmp_path)
    _refused("half.tar.gz", packed[: len(packed) // 2], "not a readable", tmp_path)
    padded = gzip.compress(raw + b"\0" * (4 << 20))  # megabytes of padding after the archive's end
    _refused("padded.tar.gz", padded, "over the import cap", tmp_path, limit=1 << 20)
    assert importer.import_bundle("whole.tar.gz", packed).joinpath("run", "metrics.jsonl").stat().st_size == 40_000


def test_a_tar_header_claiming_gigabytes_is_refused_before_it_is_inflated(tmp_path):
    """A pax header's records are read whole at the size it claims: 200 MB of zeros is ~200 KB
    packed, and was inflated into memory before any check."""
    header = tarfile.TarInfo("././@PaxHeader")
    header.type, header.size = tarfile.XHDTYPE, 200 << 20
    packer = gzip.GzipFile(fileobj=(packed := io.BytesIO()), mode="wb")
    packer.write(header.tobuf(format=tarfile.USTAR_FORMAT))
    for _ in range(200):
        packer.write(bytes(1 << 20))
    packer.close()
    assert len(packed.getvalue()) < 1 << 20
    started = time.process_time()
    _refused("pax.tar.gz", packed.getvalue(), "tar header of", tmp_path)
    assert time.process_time() - started < 1.0  # refused at the claim, not after inflating it


def test_other_hostile_shapes_are_refused_or_kept_inert(tmp_path):
    _refused("zip.tar.gz", _zip([("run/a", b"x")]), "not a readable tar", tmp_path)
    _refused("tar.zip", _tar([("run/a", b"x")]), "not a readable zip", tmp_path)
    whole = _zip([("run/metrics.jsonl", b"{}\n" * 1000)])
    _refused("cut.zip", whole[: len(whole) // 2], "not a readable zip", tmp_path)
    fifo = zipfile.ZipInfo("run/fifo")
    fifo.external_attr = (0o010644) << 16  # S_IFIFO
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr(fifo, b"")
    _refused("fifo.zip", buf.getvalue(), "special file", tmp_path)
    _refused("bs.tar.gz", _tar([("run\\..\\..\\evil", b"x")]), "escapes", tmp_path)
    inner = _zip([("../../escape", b"boom")])  # a nested archive is a file of the snapshot, never unpacked
    folder = importer.import_bundle("outer.zip", _zip([("run/inner.zip", inner), ("./run/m.jsonl", b"{}\n")]))
    assert (folder / "run" / "inner.zip").read_bytes() == inner and (folder / "run" / "m.jsonl").is_file()
    assert not (tmp_path / "escape").exists() and not (tmp_path / "cache" / "escape").exists()
    assert sorted(p.name for p in folder.rglob("*")) == ["inner.zip", "m.jsonl", "run"]
    mine, theirs = (importer.import_bundle("run.zip", _zip([("run/who", who)])) for who in (b"mine", b"theirs"))
    assert mine != theirs and (mine / "run" / "who").read_bytes() == b"mine"  # same name, other bytes: apart


def test_two_sessions_importing_the_same_bundle_at_once_get_one_snapshot(tmp_path, monkeypatch):
    data = _tar([(f"run/f{i}.jsonl", b"{}\n" * 50) for i in range(200)])
    sessions = 4
    everyone_extracted = threading.Barrier(sessions, timeout=30)
    real_make_read_only = importer.make_read_only

    def make_read_only_together(root):  # each session has unpacked its copy before any renames it
        everyone_extracted.wait()
        real_make_read_only(root)

    monkeypatch.setattr(importer, "make_read_only", make_read_only_together)
    results: list = []

    def session():
        try:
            results.append(importer.import_bundle("same-name.tar.gz", data))
        except Exception as e:  # noqa: BLE001 - recorded, asserted below
            results.append(e)

    threads = [threading.Thread(target=session) for _ in range(sessions)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    [folder] = set(results)  # the same snapshot for everyone, no error
    assert isinstance(folder, Path) and len(list((folder / "run").iterdir())) == 200
    assert [p.name for p in (tmp_path / "cache" / "imports").iterdir()] == [folder.name]  # no temp folder left


def test_the_import_page_answers_every_hostile_upload_with_a_refusal_message(monkeypatch, tmp_path):
    from streamlit.testing.v1 import AppTest

    root = tmp_path / "root"
    copy_run(NEW_RUN, root / "outputs")
    monkeypatch.setenv("RUNDASH_DIRS", str(root / "outputs"))
    monkeypatch.setenv("RUNDASH_ROOTS", str(root))
    at = AppTest.from_file(str(APP), default_timeout=90).run()
    at.switch_page("pages/import_run.py").run()
    hostile = [("clash.zip", _zip([("run/a", b"1"), ("run/a/b", b"2")])),
               ("deep.tar.gz", _tar([("a/" * 3000 + "x", b"x")])),
               ("locked.zip", _encrypted(_zip([("run/m.jsonl", b"{}\n")]))),
               ("evil.tar.gz", _tar([("run/<img src=x onerror=alert(1)>\x1b", b"x")]))]
    for name, data in hostile:
        at.get("file_uploader")[0].set_value((name, data, "application/octet-stream"))
        at.run()
        assert not at.exception, name
        assert [e.value for e in at.error if e.value.startswith("Not imported")], name
        assert not any("could not be shown" in e.value for e in at.error), name  # not the page's crash note
    imports = tmp_path / "cache" / "imports"
    assert not imports.exists() or list(imports.iterdir()) == []
