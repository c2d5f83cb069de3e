"""File identity and safe, read-only file access.

Every reader in rundash goes through these helpers so that a missing file, a broken symlink, a
symlink loop or a directory where a file was expected becomes a value (or a named error), never a
traceback, and so that nothing is ever opened for writing.

Allowed roots: when they are set (`restricted_to`/`set_roots`, else the `RUNDASH_ROOTS` environment
variable; the app always sets them), a path is read only if it resolves, symlinks followed, inside
one of them. They live in a context variable, not a module global: one caller's roots (a session's
script run, a test, a notebook, the TUI) are never another's. A thread starts without any (Python
gives a new thread an empty context): who reads in a thread of its own sets them there; Streamlit
runs each script run, fragment rerun and widget callback in such a thread, so
`streamlit_cache.use_roots` sets them at each (app.py, `pages._ui.in_session`). The
check happens at every open, and again on the opened file (a link swapped after discovery, or
between the check and the open, is caught); what is refused reads as a problem "links outside the
allowed roots". Only regular files are read: a FIFO or a device named like a run file is never
opened.
"""
from __future__ import annotations

import contextlib
import contextvars
import errno
import itertools
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class FileId:
    """What identifies one version of a file: (device, inode) say *which* file, size and
    mtime_ns say *how far* it has been written. Used as cache keys and to detect appends."""

    dev: int
    ino: int
    size: int
    mtime_ns: int

    def same_file(self, other: FileId | None) -> bool:
        return other is not None and (self.dev, self.ino) == (other.dev, other.ino)

    @property
    def mtime(self) -> float:
        return self.mtime_ns / 1e9


OUTSIDE_ROOTS = "links outside the allowed roots"
NOT_REGULAR = "not a regular file"  # a FIFO, device or folder named like a run file is never read
# real paths; None: not set in this context (then RUNDASH_ROOTS, if any)
_roots: contextvars.ContextVar[tuple[str, ...] | None] = contextvars.ContextVar("rundash_roots", default=None)


class OutsideRoots(PermissionError):
    """A path that resolves outside the allowed roots."""


def set_roots(roots: list[str | os.PathLike] | None) -> contextvars.Token:
    """Restrict the reads of the current context (this thread or asyncio task, and the tasks it
    starts) to paths under `roots` (None: back to `RUNDASH_ROOTS`, or no limit). For an entry point
    that owns its context (a script run's thread); elsewhere `restricted_to` undoes it after."""
    return _roots.set(None if roots is None else tuple(os.path.realpath(os.path.expanduser(os.fspath(r)))
                                                         for r in roots))


@contextlib.contextmanager
def restricted_to(roots: list[str | os.PathLike] | None):
    """Within this block (this context only), reads are limited to `roots`; the roots before after."""
    token = set_roots(roots)
    try:
        yield
    finally:
        _roots.reset(token)


def allowed_roots() -> tuple[str, ...] | None:
    """The roots in force here: set_roots(), else RUNDASH_ROOTS (os.pathsep separated), else None."""
    if (roots := _roots.get()) is not None:
        return roots
    return tuple(os.path.realpath(os.path.expanduser(r)) for r in env_roots()) or None


def env_roots(environ=None) -> list[str]:
    """The entries of `RUNDASH_ROOTS` (os.pathsep separated, blanks skipped), as written."""
    environ = os.environ if environ is None else environ
    return [r for r in environ.get("RUNDASH_ROOTS", "").split(os.pathsep) if r.strip()]


def inside_roots(path: str | os.PathLike) -> bool:
    """True when no roots are set, or `path` resolves inside one of them."""
    roots = allowed_roots()
    if roots is None:
        return True
    try:
        real = _memoized("real", path, lambda: os.path.realpath(path))
    except (OSError, ValueError):
        return False
    return _under(real, roots)


def _under(real: str, roots) -> bool:
    """`real` (a resolved path) is a root or below one (`/data/runs-evil` is not below `/data/runs`)."""
    return any(real == r or real.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


def _fd_inside_roots(fd: int, path) -> bool:
    """Where the opened file is now, not where `path` pointed when it was checked: a link swapped
    between the check and the open is caught. Linux names an open file in /proc/self/fd; elsewhere
    the checked path must still resolve, inside the roots, to this very file."""
    roots = allowed_roots()
    if roots is None:
        return True
    try:
        return _under(os.readlink(f"/proc/self/fd/{fd}"), roots)
    except OSError:
        pass
    try:
        real = os.path.realpath(path)
        named, opened = os.stat(real), os.fstat(fd)
    except (OSError, ValueError):
        return False
    return (named.st_dev, named.st_ino) == (opened.st_dev, opened.st_ino) and _under(real, roots)


def check_inside(path: str | os.PathLike) -> None:
    if not inside_roots(path):
        raise OutsideRoots(errno.EACCES, OUTSIDE_ROOTS, os.fspath(path))


_stat_memo: contextvars.ContextVar[dict | None] = contextvars.ContextVar("rundash_stat_memo", default=None)


@contextlib.contextmanager
def stat_memo():
    """Within this block, `file_id` and `is_dir` stat each path once (one discovery pass:
    detection, the runs-list row and the sort share it)."""
    token = _stat_memo.set({})
    try:
        yield
    finally:
        _stat_memo.reset(token)


def _memoized(kind: str, path, compute):
    memo = _stat_memo.get()
    if memo is None:
        return compute()
    key = (kind, os.fspath(path))
    if key not in memo:
        memo[key] = compute()
    return memo[key]


def file_id(path: str | os.PathLike) -> FileId | None:
    """The FileId of a regular file, or None when it is missing, a broken link or not a file."""
    return _memoized("file", path, lambda: _file_id(path))


def _file_id(path) -> FileId | None:
    if not inside_roots(path):
        return None
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return FileId(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def seed_file_id(path: str, st: os.stat_result | None) -> None:
    """Within `stat_memo()`, remember `path`'s FileId from a stat already made (e.g. a
    `DirEntry.stat()` of a listing: it follows symlinks as `os.stat` does); no-op outside."""
    memo = _stat_memo.get()
    if memo is not None:
        memo[("file", path)] = (FileId(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
                                if st is not None and stat.S_ISREG(st.st_mode) else None)


def is_dir(path: str | os.PathLike) -> bool:
    """`os.path.isdir`, memoized inside `stat_memo()` (a folder's sibling `harbor_trials/` is asked
    once per log in it)."""
    return _memoized("dir", path, lambda: os.path.isdir(path))


def mtime(path: str | os.PathLike) -> float | None:
    """mtime in epoch seconds, or None if the path cannot be stat'ed."""
    try:
        return os.stat(path).st_mtime
    except (OSError, ValueError):
        return None


def describe_unreadable(path: str | os.PathLike) -> str:
    """A short human sentence saying why a path cannot be read as a file."""
    if not inside_roots(path):
        return OUTSIDE_ROOTS
    p = Path(path)
    try:
        st = os.stat(p)
    except OSError as e:
        if e.errno == errno.ELOOP:  # Path.exists() says False here too: not "broken"
            return "symlink loop"
        if e.errno == errno.ENOENT and os.path.islink(p):
            return "broken symlink"
        return _os_error_text(e)
    if not stat.S_ISREG(st.st_mode):
        return NOT_REGULAR
    try:
        with open(p, "rb"):
            pass
    except OSError as e:
        return _os_error_text(e)
    return "unreadable"


def _os_error_text(e: OSError) -> str:
    return e.strerror.lower() if e.strerror else type(e).__name__


def open_file(path: str | os.PathLike):
    """A regular file inside the allowed roots, opened for reading (binary). Raises OSError:
    OutsideRoots, or "not a regular file" for a FIFO/device (opened without blocking, then refused)."""
    check_inside(path)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        if not _fd_inside_roots(fd, path):
            raise OutsideRoots(errno.EACCES, OUTSIDE_ROOTS, os.fspath(path))
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, NOT_REGULAR, os.fspath(path))
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_range(path: str | os.PathLike, start: int, end: int | None = None) -> bytes:
    """Bytes [start, end) of a file (end=None: to EOF). Raises OSError like open()."""
    with open_file(path) as fh:
        fh.seek(start)
        return fh.read() if end is None else fh.read(max(0, end - start))


def read_tail(path: str | os.PathLike, nbytes: int) -> tuple[bytes, int]:
    """The last `nbytes` of a file and the offset they start at."""
    with open_file(path) as fh:
        size = fh.seek(0, os.SEEK_END)
        start = max(0, size - nbytes)
        fh.seek(start)
        return fh.read(), start


def read_text(path: str | os.PathLike, limit: int = 8 << 20) -> str:
    """A small text file, decoded leniently (bad UTF-8 becomes U+FFFD, NUL bytes are dropped)."""
    data = read_range(path, 0, limit)
    return data.replace(b"\x00", b"").decode("utf-8", errors="replace")


def is_within(path: str | os.PathLike, roots: list[str | os.PathLike]) -> bool:
    """True when `path` resolves (symlinks followed) to a location under one of `roots`."""
    try:
        return _under(os.path.realpath(path), [os.path.realpath(root) for root in roots])
    except (OSError, ValueError):
        return False


WALK_MAX_DEPTH = 8  # config trees are a few levels deep; a hostile one is cut here
WALK_MAX_ENTRIES = 5000


_SURROGATE = re.compile("[\ud800-\udfff]")


def shown_path(path: str) -> str:
    """A path (or any text) as frames, pages and JSON can carry it (UTF-8): a file name byte that
    is not UTF-8 (a surrogate escape, as os.listdir gives it) written `\\xff`, as the byte it is;
    any other lone surrogate as `\\ud800`; the rest as is. The one escape form of rundash
    (`present.utf8_text` is this)."""
    try:
        path.encode("utf-8")
        return path
    except UnicodeEncodeError:
        return _SURROGATE.sub(_escape_surrogate, path)


def _escape_surrogate(m: re.Match) -> str:
    code = ord(m.group())
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"


def listed_path(shown: str) -> str:
    """The real path behind a `shown_path` (the entry of its folder shown so), else `shown`."""
    if "\\x" not in shown or os.path.lexists(shown):
        return shown
    folder, name = os.path.split(shown)
    folder = listed_path(folder) if folder != shown else folder
    try:
        names = os.listdir(folder)
    except OSError:
        return shown
    return next((os.path.join(folder, n) for n in names if shown_path(n) == name), shown)


def walk_files(root: str, *, skip=lambda name: False, max_depth: int = WALK_MAX_DEPTH,
               max_entries: int = WALK_MAX_ENTRIES) -> list[str]:
    """The files below `root`, folders in name order, iteratively and bounded in depth and entry
    count (a tree 1,000 levels deep or with 100k entries costs no more than the bounds: a folder
    is listed only as far as the count allows, then that part sorted); folder links are not
    followed, unreadable folders are passed over, and a root outside the allowed roots (a link
    out) is not listed at all."""
    if not inside_roots(root):
        return []
    out, stack, seen = [], [(root, 0)], 0
    while stack:
        folder, depth = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = sorted(itertools.islice(it, max_entries - seen + 1), key=lambda e: e.name)
        except OSError:
            continue
        subdirs = []
        for e in entries:
            seen += 1
            if seen > max_entries:
                return out
            try:
                if e.is_dir(follow_symlinks=False):
                    if depth < max_depth and not skip(e.name):
                        subdirs.append((e.path, depth + 1))
                else:
                    out.append(e.path)
            except OSError:
                continue
        stack.extend(reversed(subdirs))
    return out


def unreadable_below(root: str, *, max_depth: int = WALK_MAX_DEPTH,
                     max_entries: int = WALK_MAX_ENTRIES) -> list[tuple[str, str]]:
    """(path, why) for each folder below `root` (itself included) that cannot be listed and each
    file that cannot be read (mode 000, another user's): listings pass over them silently, so
    the Problems page names them. Bounded like `walk_files`; links are not followed, and a root
    outside the allowed roots is not looked into."""
    if not os.path.lexists(root) or not inside_roots(root):
        return []
    out, stack, seen = [], [(root, 0)], 0
    while stack and seen <= max_entries:
        folder, depth = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = list(itertools.islice(it, max_entries - seen + 1))
        except NotADirectoryError:
            entries = []
        except OSError as e:
            out.append((folder, _os_error_text(e).lower()))
            continue
        for e in sorted(entries, key=lambda e: e.name):
            seen += 1
            try:
                if e.is_dir(follow_symlinks=False):
                    if depth < max_depth:
                        stack.append((e.path, depth + 1))
                elif e.is_file(follow_symlinks=False) and not os.access(e.path, os.R_OK):
                    out.append((e.path, "permission denied"))
            except OSError:
                continue
    return sorted(out)

