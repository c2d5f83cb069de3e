"""Importing a run bundle (`.zip`, `.tar.gz`) as a read-only snapshot in rundash's cache folder.

A bundle is untrusted: every member is checked before anything is written. Refused are members
with an absolute name or a `..` part, links (symbolic or hard), devices and FIFOs, and bundles
whose size or whose members' total size is over the cap (`RUNDASH_IMPORT_MAX_MB`, default 512),
a zip bomb included (the bytes actually inflated are counted too, not only the sizes a member
declares). A bundle is extracted into a temporary folder next to its place, its files made
read-only, then renamed to `<cache>/imports/<sha256[:16]>/`: the same bundle imported twice is
the same snapshot, and a half-written one is never seen. Refused too: names with control
characters or not UTF-8, over `MAX_DEPTH` folders deep or too long, a name given twice or both a
file and a folder, more than `MAX_MEMBERS` members, encrypted zip members, and a compressed tar
whose stream is truncated or corrupt (read to its end and its checksum checked).
"""
from __future__ import annotations

import bz2
import gzip
import hashlib
import io
import lzma
import os
import shutil
import stat
import tarfile
import tempfile
import zipfile
import zlib
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from rundash_core import settings

DEFAULT_MAX_MB = 512
CHUNK = 1 << 20
MAX_MEMBERS = 10_000  # files and folders of one bundle: a run is hundreds, a flood of tiny files is refused
MAX_DEPTH = 32  # folders deep
MAX_PART_BYTES, MAX_NAME_BYTES = 255, 1024  # one path part / a whole member name (the file system's limits)
MAX_TAR_READ = 1 << 20  # one read by tarfile: 16 KB of data or one header (a pax / long-name header is a few KB)
_READ_ERRORS = (tarfile.TarError, zipfile.BadZipFile, OSError, EOFError, zlib.error, lzma.LZMAError,
                NotImplementedError, ValueError)  # (a corrupt offset: "negative seek value")


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
    """The member's relative path, or ImportRefused when it is absolute, climbs out (`..`), holds
    control characters or non-UTF-8 bytes, or is too deep or too long to be a run file."""
    if not name or "\x00" in name:
        raise ImportRefused(f"member {name!r}: empty or NUL in the name")
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise ImportRefused(f"member {name!r}: a control character in the name")
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:  # tar names that were not UTF-8 (surrogate escapes)
        raise ImportRefused(f"member {name!r}: the name is not UTF-8") from None
    unified = name.replace("\\", "/")
    path = PurePosixPath(unified)
    if path.is_absolute() or (len(unified) > 1 and unified[1] == ":"):
        raise ImportRefused(f"member {name!r}: absolute path")
    if ".." in path.parts:
        raise ImportRefused(f"member {name!r}: escapes the bundle (..)")
    if len(path.parts) > MAX_DEPTH:
        raise ImportRefused(f"member {name[:80]!r}…: nested more than {MAX_DEPTH} folders deep")
    if size > MAX_NAME_BYTES or any(len(p.encode()) > MAX_PART_BYTES for p in path.parts):
        raise ImportRefused(f"member {name[:80]!r}…: the name is too long")
    return path


class _Layout:
    """The names met so far: refuses a file named twice, a name that is both a file and a folder,
    and more than `max_members` members, before anything is written."""

    def __init__(self, max_members: int):
        self.max_members, self.count, self.files, self.dirs = max_members, 0, set(), set()

    def add(self, path: PurePosixPath, *, is_dir: bool) -> bool:
        """True when the member is to be extracted (False: the bundle's own top folder `.`)."""
        self.count += 1
        if self.count > self.max_members:
            raise ImportRefused(f"more than {self.max_members} members: over the cap of a bundle")
        name = str(path)
        if not path.parts:
            if is_dir:
                return False
            raise ImportRefused(f"member {name!r}: not a file name")
        clash = next((str(q) for q in path.parents if str(q) in self.files), None)
        if clash is not None:
            raise ImportRefused(f"member {name!r}: inside {clash!r}, which is a file")
        if name in self.files or (not is_dir and name in self.dirs):
            raise ImportRefused(f"member {name!r}: named twice (or both a file and a folder)")
        (self.dirs if is_dir else self.files).add(name)
        self.dirs.update(str(parent) for parent in path.parents)
        return True


def import_bundle(filename: str, data: bytes, *, limit: int | None = None,
                  max_members: int = MAX_MEMBERS) -> Path:
    """Extract a `.zip` / `.tar.gz` / `.tgz` / `.tar` bundle; returns the snapshot folder."""
    limit = max_bytes() if limit is None else limit
    if len(data) > limit:
        raise ImportRefused(f"{filename}: {len(data) >> 20} MB is over the import cap of {limit >> 20} MB")
    lower = filename.lower()
    if not lower.endswith((".zip", ".tar.gz", ".tgz", ".tar")):
        raise ImportRefused(f"{filename}: not a .zip or .tar.gz bundle")
    dest = imports_dir() / hashlib.sha256(data).hexdigest()[:16]
    if dest.is_dir():
        return dest
    try:  # a folder of its own: two sessions of this server importing the same bundle at once never share one
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent))
    except OSError as e:
        raise ImportRefused(f"{filename}: rundash's cache folder is not writable ({e})") from e
    try:
        if lower.endswith(".zip"):
            _extract_zip(data, tmp, limit, max_members)
        else:
            _extract_tar(data, tmp, limit, max_members)
        make_read_only(tmp)
        try:
            os.rename(tmp, dest)
        except OSError:  # imported at the same moment by another session: theirs is the same bytes
            if not dest.is_dir():
                raise
    except ImportRefused:
        raise
    except (OSError, RecursionError) as e:  # writing failed (disk full, a name the file system refuses)
        raise ImportRefused(f"{filename}: could not be unpacked ({type(e).__name__}: {e})") from e
    finally:
        if tmp.exists():
            _remove(tmp)
    return dest


def _zip_entries_bound(data: bytes) -> int:
    """At least as many as the entries `zipfile` would build objects for (central directory
    signatures in the directory the end record names), counted before it builds them."""
    end = data.rfind(b"PK\x05\x06", max(0, len(data) - (1 << 16) - 22))
    if end < 0:
        return 0  # not a zip: zipfile says so
    size = int.from_bytes(data[end + 12:end + 16], "little")
    if size == 0xFFFFFFFF and (z64 := data.rfind(b"PK\x06\x06", 0, end)) >= 0:
        size = int.from_bytes(data[z64 + 40:z64 + 48], "little")
    return data.count(b"PK\x01\x02", max(0, end - size - 76), end)


def _extract_zip(data: bytes, dest: Path, limit: int, max_members: int) -> None:
    if _zip_entries_bound(data) > max_members:
        raise ImportRefused(f"more than {max_members} members: over the cap of a bundle")
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except _READ_ERRORS as e:
        raise ImportRefused(f"not a readable zip file ({e})") from e
    with archive:
        members, declared, layout = [], 0, _Layout(max_members)
        for m in archive.infolist():
            path = safe_member_name(m.filename)
            kind = stat.S_IFMT(m.external_attr >> 16)
            if kind and kind not in (stat.S_IFREG, stat.S_IFDIR):
                raise ImportRefused(f"member {m.filename!r}: a link or special file")
            if m.flag_bits & 0x1:
                raise ImportRefused(f"member {m.filename!r}: encrypted (a password-protected zip is not imported)")
            if layout.add(path, is_dir=m.is_dir()):
                members.append((m, path))
            declared += m.file_size
        if declared > limit:
            raise ImportRefused(f"the bundle inflates to {declared >> 20} MB, over the cap of {limit >> 20} MB")
        written = 0
        for m, path in members:
            target = dest / path
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
            except ImportRefused:
                raise
            except _READ_ERRORS as e:
                raise ImportRefused(f"not a readable zip file ({m.filename!r}: {e})") from e


class _BoundedReads:
    """A decompressed tar stream whose single reads are bounded: tarfile reads a pax or long-name
    header whole, at the size the header claims, so a header claiming gigabytes of zeros (a few
    KB compressed) is refused at the claim instead of being inflated into memory."""

    def __init__(self, stream: BinaryIO):
        self._stream = stream

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0 or n > MAX_TAR_READ:
            raise ImportRefused(f"a tar header of {n} bytes: over {MAX_TAR_READ >> 10} KB, not a run bundle")
        return self._stream.read(n)

    def seek(self, *args) -> int:
        return self._stream.seek(*args)

    def tell(self) -> int:
        return self._stream.tell()


def _decompressed(data: bytes) -> BinaryIO:
    """The tar stream inside a .tar.gz / .tar.bz2 / .tar.xz (by their magic bytes), or the bytes."""
    if data[:2] == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=io.BytesIO(data))
    if data[:3] == b"BZh":
        return bz2.BZ2File(io.BytesIO(data))
    if data[:6] == b"\xfd7zXZ\x00":
        return lzma.LZMAFile(io.BytesIO(data))
    return io.BytesIO(data)


def _extract_tar(data: bytes, dest: Path, limit: int, max_members: int) -> None:
    stream = _decompressed(data)
    try:
        archive = tarfile.open(fileobj=_BoundedReads(stream), mode="r:")
    except ImportRefused:
        raise
    except _READ_ERRORS as e:
        raise ImportRefused(f"not a readable tar bundle ({e})") from e
    with archive:
        members, total, layout = [], 0, _Layout(max_members)
        while True:  # each header checked as it is read, before the next one is looked for
            try:
                m = archive.next()
            except ImportRefused:
                raise
            except _READ_ERRORS as e:
                raise ImportRefused(f"not a readable tar bundle ({e})") from e
            if m is None:
                break
            path = safe_member_name(m.name)
            if not (m.isfile() or m.isdir()):
                raise ImportRefused(f"member {m.name!r}: a link, device or FIFO")
            total += m.size
            if total > limit:
                raise ImportRefused(f"the bundle inflates to over the cap of {limit >> 20} MB")
            if layout.add(path, is_dir=m.isdir()):
                m.name = str(path)  # extracted under the name that was checked (`\\` as `/`, no `./`)
                members.append(m)
        _read_to_end(stream, limit - total + CHUNK)  # (+ the end-of-archive padding some tars round up to)
        try:
            archive.extractall(dest, members=members, filter="data")  # the same checks again, by tarfile
        except _READ_ERRORS as e:
            raise ImportRefused(f"refused while extracting: {e}") from e


def _read_to_end(stream: BinaryIO, budget: int) -> None:
    """Read a compressed tar's stream past the archive's end marker to its own end, so that a
    truncated or corrupt stream (its length and checksum come last) is refused, within `budget`
    bytes (trailing padding is not a way around the cap)."""
    try:
        while chunk := stream.read(CHUNK):
            budget -= len(chunk)
            if budget < 0:
                raise ImportRefused("the bundle inflates to over the import cap (data after the archive's end)")
    except ImportRefused:
        raise
    except _READ_ERRORS as e:
        raise ImportRefused(f"not a readable tar bundle: truncated or corrupt ({e})") from e


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
