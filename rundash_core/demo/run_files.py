"""Writing a run directory whose file and folder mtimes say when each file was last written in the
simulated run, so the dashboard's "updated" and liveness read like a real run's."""
from __future__ import annotations

import json
import os
from pathlib import Path


class RunFiles:
    """Writes files under a run dir and remembers each one's intended mtime; `finish` applies them."""

    def __init__(self, run_dir: Path):
        self.dir = run_dir
        self.mtimes: dict[str, float] = {}

    def text(self, rel: str, data: str | list[str], mtime: float) -> None:
        p = self.dir / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        with open(p, "w", encoding="utf-8", newline="") as fh:
            fh.write(data if isinstance(data, str) else "".join(data))
        self.mtimes[rel] = mtime

    def json(self, rel: str, obj, mtime: float) -> None:
        self.text(rel, json.dumps(obj, indent=2) + "\n", mtime)

    def link(self, rel: str, target: str, mtime: float) -> None:
        """A relative symlink made like prime-rl: a temporary `.target` link renamed over `rel`."""
        p = self.dir / rel
        tmp = p.parent / f".{target}"
        os.symlink(target, tmp)
        os.replace(tmp, p)
        self.mtimes[rel] = mtime

    def finish(self) -> None:
        """Set every file's mtime, then each folder's to its newest entry's, deepest first."""
        dirs: dict[str, float] = {}
        for rel, t in self.mtimes.items():
            os.utime(self.dir / rel, (t, t), follow_symlinks=False)
            parts = rel.split("/")
            for i in range(len(parts)):
                d = "/".join(parts[:i])
                dirs[d] = max(dirs.get(d, t), t)
        for d in sorted(dirs, key=lambda x: -x.count("/") - (x != "")):
            os.utime(self.dir / d if d else self.dir, (dirs[d], dirs[d]))
