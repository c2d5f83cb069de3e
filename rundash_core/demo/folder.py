"""Where the demo folder lives and how it is recognised: a marker file names the demo version and
when it was written, so a stale copy can be replaced, and a folder that is neither a demo nor
empty is never touched."""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

MARKER = ".rundash-demo.json"


def _can_create(path: Path) -> bool:
    """Could `path` be created (or written, if it exists)? Checks the nearest existing ancestor;
    creates nothing."""
    p = path
    while not os.path.lexists(p):
        if p.parent == p:
            return False
        p = p.parent
    return p.is_dir() and os.access(p, os.W_OK | os.X_OK)


def demo_root() -> Path:
    """`$RUNDASH_CACHE_DIR/demo`, else `~/.cache/rundash/demo`, else a folder under the temp dir."""
    env = os.environ.get("RUNDASH_CACHE_DIR")
    candidates: list[Path] = []
    if env:
        candidates.append(Path(env).expanduser() / "demo")
    else:
        try:
            candidates.append(Path.home() / ".cache" / "rundash" / "demo")
        except (RuntimeError, KeyError):
            pass
    uid = os.getuid() if hasattr(os, "getuid") else "user"
    candidates.append(Path(tempfile.gettempdir()) / f"rundash-{uid}" / "demo")
    for c in candidates:
        if _can_create(c):
            return c.absolute()
    return candidates[-1].absolute()


def read_marker(root: Path) -> dict | None:
    try:
        with open(root / MARKER, encoding="utf-8") as fh:
            value = json.load(fh)
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def is_ours(root: Path) -> bool:
    """An existing folder may be replaced only if it is a demo folder (any version) or empty."""
    if not root.is_dir() or root.is_symlink():
        return False
    if (root / MARKER).exists():
        return True
    try:
        return not any(root.iterdir())
    except OSError:
        return False
