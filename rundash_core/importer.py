"""Importing a run bundle (`.zip`, `.tar.gz`) as a read-only snapshot in rundash's cache folder.

A bundle is untrusted: every member is checked before anything is written. Refused are members
with an absolute name or a `..` part, links (symbolic or hard), devices and FIFOs, and bundles
whose size or whose members' total size is over the cap (`RUNDASH_IMPORT_MAX_MB`, default 512),
a zip bomb included (the bytes actually inflated are counted too, not only the sizes a member
declares). A bundle is extracted into a temporary folder next to its place, its files made
read-only, then renamed to `<cache>/imports/<sha256[:16]>/`: the same bundle imported twice is
the same snapshot, and a half-written one is never seen.
"""
from __future__ import annotations

import hashlib
import io
import os
import shutil
import stat
import tarfile
import zipfile
import zlib
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from . import settings

DEFAULT_MAX_MB = 512
CHUNK = 1 << 20


class ImportRefused(ValueError):
    """A bundle that is not imported, with the reason for the user."""


def max_bytes(environ: dict | None = None) -> int:
    raw = (os.environ if environ is None else environ).get("RUNDASH_IMPORT_MAX_MB", "")
    try:
        mb = float(raw) if raw else DEFAULT_MAX_MB
    except ValueError:
        mb = DEFAULT_MAX_MB
    return int(mb * (1 << 20))


def imports_dir() -> Path:
    return settings.cache_dir() / "imports"


def safe_member_name(name: str) -> PurePosixPath:
    """The member's relative path, or ImportRefused when it is absolute or climbs out (`..`)."""
    if not name or "\x00" in name:
        raise ImportRefused(f"member {name!r}: empty or NUL in the name")
    unified = name.replace("\\", "/")
    path = PurePosixPath(unified)
    if path.is_absolute() or (len(unified) > 1 and unified[1] == ":"):
        raise ImportRefused(f"member {name!r}: absolute path")
    if ".." in path.parts:
        raise ImportRefused(f"member {name!r}: escapes the bundle (..)")
    return path


def import_bundle(filename: str, data: bytes, *, limit: int | None = None) -> Path:
    """Extract a `.zip` / `.tar.gz` / `.tgz` / `.tar` bundle; returns the snapshot folder."""
    limit = max_bytes() if limit is None else limit
    if len(data) > limit:
        raise ImportRefused(f"{filename}: {len(data) >> 20} MB is over the import cap of {limit >> 20} MB")
    dest = imports_dir() / hashlib.sha256(data).hexdigest()[:16]
    if dest.is_dir():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        lower = filename.lower()
        if lower.endswith(".zip"):
            _extract_zip(io.BytesIO(data), tmp, limit)
        elif lower.endswith((".tar.gz", ".tgz", ".tar")):
            _extract_tar(io.BytesIO(data), tmp, limit)
        else:
            raise ImportRefused(f"{filename}: not a .zip or .tar.gz bundle")
        make_read_only(tmp)
        try:
            os.rename(tmp, dest)
        except OSError:  # imported at the same moment by another session: theirs is the same bytes
            if not dest.is_dir():
                raise
    finally:
        if tmp.exists():
            _remove(tmp)
    return dest


def _extract_zip(buf: BinaryIO, dest: Path, limit: int) -> None:
    try:
        archive = zipfile.ZipFile(buf)
    except zipfile.BadZipFile as e:
        raise ImportRefused(f"not a readable zip file ({e})") from e
    with archive:
        members = archive.infolist()
        declared = 0
        for m in members:
            safe_member_name(m.filename)
            kind = stat.S_IFMT(m.external_attr >> 16)
            if kind and kind not in (stat.S_IFREG, stat.S_IFDIR):
                raise ImportRefused(f"member {m.filename!r}: a link or special file")
            declared += m.file_size
        if declared > limit:
            raise ImportRefused(f"the bundle inflates to {declared >> 20} MB, over the cap of {limit >> 20} MB")
        written = 0
        for m in members:
            target = dest / safe_member_name(m.filename)
            if m.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                with archive.open(m) as src, open(target, "xb") as out:
                    while chunk := src.read(CHUNK):  # counted as inflated: a member lying about its size
                        written += len(chunk)
                        if written > limit:
                            raise ImportRefused(f"the bundle inflates to over the cap of {limit >> 20} MB")
                        out.write(chunk)
            except (zipfile.BadZipFile, zlib.error, OSError, EOFError, NotImplementedError) as e:
                raise ImportRefused(f"not a readable zip file ({m.filename!r}: {e})") from e


def _extract_tar(buf: BinaryIO, dest: Path, limit: int) -> None:
    try:
        archive = tarfile.open(fileobj=buf, mode="r:*")
    except (tarfile.TarError, OSError, EOFError) as e:
        raise ImportRefused(f"not a readable tar bundle ({e})") from e
    with archive:
        members, total = [], 0
        while True:  # each header checked as it is read, before the next one is looked for
            try:
                m = archive.next()
            except (tarfile.TarError, OSError, EOFError) as e:
                raise ImportRefused(f"not a readable tar bundle ({e})") from e
            if m is None:
                break
            safe_member_name(m.name)
            if not (m.isfile() or m.isdir()):
                raise ImportRefused(f"member {m.name!r}: a link, device or FIFO")
            total += m.size
            if total > limit:
                raise ImportRefused(f"the bundle inflates to over the cap of {limit >> 20} MB")
            members.append(m)
        try:
            archive.extractall(dest, members=members, filter="data")  # the same checks again, by tarfile
        except (tarfile.TarError, OSError) as e:
            raise ImportRefused(f"refused while extracting: {e}") from e


def make_read_only(root: Path) -> None:
    """Files read-only (a snapshot is never changed in place), folders left listable."""
    for dirpath, _dirnames, filenames in os.walk(root):
        for n in filenames:
            os.chmod(os.path.join(dirpath, n), 0o444)


def _remove(path: Path) -> None:
    for dirpath, dirnames, _ in os.walk(path):
        for n in dirnames:
            os.chmod(os.path.join(dirpath, n), 0o755)
    shutil.rmtree(path, ignore_errors=True)


def check_import_dir(path: str, roots: list[str]) -> tuple[str | None, str | None]:
    """(absolute path, None) when an external run directory may be loaded, else (None, why not)."""
    return settings.check_added_dir(path, roots)
