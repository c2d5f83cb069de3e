"""Import: bundles become read-only snapshots in the cache folder; hostile bundles are refused
before anything is written; the Import page adds a directory under the roots (and only there)."""
from __future__ import annotations

import io
import os
import stat
import tarfile
import zipfile
from pathlib import Path

import pytest

import rundash_core as rd
from rundash_core.io import files
from rundash_core.safety import importer

from helpers import NEW_RUN, OLD_RUN, REPO, copy_run

APP = REPO / "app.py"


@pytest.fixture(autouse=True)
def _cache(monkeypatch, tmp_path):
    monkeypatch.setenv("RUNDASH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("RUNDASH_IMPORT_MAX_MB", raising=False)


def _tar_of(run: Path, arcname: str | None = None) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(run, arcname=arcname or run.name)
    return buf.getvalue()


def _zip_of(run: Path) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for p in sorted(run.rglob("*")):
            zf.write(p, Path(run.name) / p.relative_to(run))
    return buf.getvalue()


def _tar_with(member: tarfile.TarInfo, data: bytes = b"") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.addfile(member, io.BytesIO(data) if data else None)
    return buf.getvalue()


def _nothing_written(tmp_path: Path) -> bool:
    imports = tmp_path / "cache" / "imports"
    return not imports.exists() or list(imports.iterdir()) == []


@pytest.mark.parametrize("pack,name", [(_tar_of, "run.tar.gz"), (_zip_of, "run.zip")])
def test_a_bundle_becomes_a_read_only_snapshot_run(tmp_path, pack, name):
    data = pack(NEW_RUN)
    folder = importer.import_bundle(name, data)
    assert folder.parent == tmp_path / "cache" / "imports" and len(folder.name) == 16
    run_files = [p for p in folder.rglob("*") if p.is_file()]
    assert run_files and all(not (p.stat().st_mode & 0o222) for p in run_files)  # read-only
    original = rd.open_run(NEW_RUN).overview()
    [row] = rd.discover([folder]).itertuples()
    assert row.step == original.step and row.kind == "prime-rl"
    assert importer.import_bundle(name, data) == folder  # the same bytes: the same snapshot


def test_hostile_members_are_refused_before_anything_is_written(tmp_path):
    evil = tarfile.TarInfo("../evil")
    evil.size = 4
    absolute = tarfile.TarInfo("/etc/passwd")
    absolute.size = 4
    link = tarfile.TarInfo("run/metrics.jsonl")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    hard = tarfile.TarInfo("run/config.toml")
    hard.type, hard.linkname = tarfile.LNKTYPE, "/etc/shadow"
    device = tarfile.TarInfo("run/dev")
    device.type = tarfile.CHRTYPE
    cases = [("escapes", _tar_with(evil, b"boom")), ("absolute", _tar_with(absolute, b"root")),
             ("link", _tar_with(link)), ("link", _tar_with(hard)), ("device", _tar_with(device))]
    for reason, data in cases:
        with pytest.raises(importer.ImportRefused, match=reason):
            importer.import_bundle("bad.tar.gz", data)
        assert _nothing_written(tmp_path)
    assert not (tmp_path / "evil").exists() and not (tmp_path / "cache" / "evil").exists()


def test_hostile_zip_members_are_refused(tmp_path):
    def zip_with(name: str, data: bytes = b"x", mode: int | None = None) -> bytes:
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as zf:
            info = zipfile.ZipInfo(name)
            if mode is not None:
                info.external_attr = mode << 16
            zf.writestr(info, data)
        return buf.getvalue()

    for name, mode, reason in [("../evil", None, "escapes"), ("/etc/passwd", None, "absolute"),
                               ("a/../../evil", None, "escapes"), ("C:/windows/x", None, "absolute"),
                               ("run/metrics.jsonl", stat.S_IFLNK | 0o777, "link")]:
        with pytest.raises(importer.ImportRefused, match=reason):
            importer.import_bundle("bad.zip", zip_with(name, b"/etc/passwd", mode))
        assert _nothing_written(tmp_path)


def test_a_zip_bomb_over_the_cap_is_refused(tmp_path, monkeypatch):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("run/metrics.jsonl", b"\0" * (3 << 20))  # 3 MB of zeros, a few KB packed
    data = buf.getvalue()
    assert len(data) < 64 << 10
    with pytest.raises(importer.ImportRefused, match="over the cap"):
        importer.import_bundle("bomb.zip", data, limit=1 << 20)
    # a member that lies about its size is caught while inflating
    lying = bytearray(data)
    for sig in (b"PK\x01\x02", b"PK\x03\x04"):  # the central directory and local header sizes
        at = lying.find(sig)
        off = 24 if sig == b"PK\x01\x02" else 22
        lying[at + off:at + off + 4] = (100).to_bytes(4, "little")
    with pytest.raises(importer.ImportRefused, match="over the cap|not a readable"):
        importer.import_bundle("bomb.zip", bytes(lying), limit=1 << 20)
    monkeypatch.setenv("RUNDASH_IMPORT_MAX_MB", "0.01")
    with pytest.raises(importer.ImportRefused, match="over the import cap"):
        importer.import_bundle("run.tar.gz", _tar_of(NEW_RUN))
    assert _nothing_written(tmp_path)


def test_garbage_and_unknown_bundles_are_refused_with_a_message(tmp_path):
    with pytest.raises(importer.ImportRefused, match="not a readable"):
        importer.import_bundle("run.zip", b"not a zip at all")
    with pytest.raises(importer.ImportRefused, match="not a readable"):
        importer.import_bundle("run.tar.gz", b"\x1f\x8b garbage")
    with pytest.raises(importer.ImportRefused, match="not a .zip or .tar.gz"):
        importer.import_bundle("run.rar", b"whatever")
    assert _nothing_written(tmp_path)


def test_import_page_adds_a_directory_under_the_roots_only(monkeypatch, tmp_path):
    from streamlit.testing.v1 import AppTest

    root, outside = tmp_path / "root", tmp_path / "outside"
    copy_run(NEW_RUN, root / "outputs")
    copy_run(OLD_RUN, root / "more")
    copy_run(OLD_RUN, outside, name="secret-run")
    os.symlink(outside, root / "link-out")
    monkeypatch.setenv("RUNDASH_DIRS", str(root / "outputs"))
    monkeypatch.setenv("RUNDASH_ROOTS", str(root))
    at = AppTest.from_file(str(APP), default_timeout=90).run()
    at.switch_page("pages/import_run.py").run()
    assert not at.exception
    box = next(t for t in at.text_input if t.label == "Directory path")
    for bad in [str(outside), f"{root}/../outside", str(root / "link-out"), f"{root}/%2e%2e%2foutside",
                f"{root}/%252e%252e%252foutside"]:
        box.set_value(bad)
        next(b for b in at.button if b.label == "Load").click()
        at.run()
        box = next(t for t in at.text_input if t.label == "Directory path")
        assert any("outside the allowed roots" in e.value for e in at.error), bad
        assert "secret-run" not in at.sidebar.selectbox[0].options
    box.set_value(str(root / "more"))
    next(b for b in at.button if b.label == "Load").click()
    at.run()
    assert not at.exception
    assert any(OLD_RUN.name in o for o in at.sidebar.selectbox[0].options)
    assert any("Added" in s.value for s in at.success)
    files.set_roots(None)
