"""Where runs come from: directories given at start, the allowed roots, the cache folder."""
from __future__ import annotations

import os
from pathlib import Path

from .io.files import is_within


def cache_dir() -> Path:
    """rundash's own cache folder (never inside a run directory)."""
    base = os.environ.get("RUNDASH_CACHE_DIR")
    return Path(base) if base else Path.home() / ".cache" / "rundash"


def startup_dirs(argv: list[str] | None = None, environ: dict | None = None) -> list[str]:
    """Directories from `streamlit run app.py -- DIR...`, else `RUNDASH_DIRS` (os.pathsep list)."""
    environ = os.environ if environ is None else environ
    dirs = [a for a in (argv or []) if a and not a.startswith("-")]
    if not dirs:
        dirs = [d for d in environ.get("RUNDASH_DIRS", "").split(os.pathsep) if d.strip()]
    return [os.path.abspath(os.path.expanduser(d)) for d in dirs]


def allowed_roots(start_dirs: list[str], environ: dict | None = None) -> list[str]:
    """Roots under which directories may be added at run time: `RUNDASH_ROOTS` if set, else the
    directories given at start."""
    environ = os.environ if environ is None else environ
    roots = [d for d in environ.get("RUNDASH_ROOTS", "").split(os.pathsep) if d.strip()]
    return [os.path.abspath(os.path.expanduser(r)) for r in roots] or list(start_dirs)


def check_added_dir(path: str, roots: list[str]) -> tuple[str | None, str | None]:
    """(absolute path, None) when `path` may be added, else (None, a message saying why not)."""
    path = path.strip()
    if not path:
        return None, "enter a directory path"
    full = os.path.abspath(os.path.expanduser(path))
    if not is_within(full, roots):
        return None, f"{full} is outside the allowed roots ({', '.join(roots) or 'none configured'})"
    if not os.path.isdir(full):
        return None, f"{full}: no such directory"
    return full, None
