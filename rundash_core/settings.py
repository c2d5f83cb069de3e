"""Where runs come from: directories given at start, the allowed roots, the cache folder."""
from __future__ import annotations

import os
import tomllib
from pathlib import Path
from urllib.parse import unquote

from rundash_core.io.files import env_roots, is_within


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
    return [os.path.abspath(os.path.expanduser(r)) for r in env_roots(environ)] or list(start_dirs)


def check_added_dir(path: str, roots: list[str]) -> tuple[str | None, str | None]:
    """(absolute path, None) when `path` may be added, else (None, a message saying why not)."""
    path = path.strip()
    if not path:
        return None, "enter a directory path"
    full = os.path.abspath(os.path.expanduser(path))
    decoded = os.path.abspath(os.path.expanduser(unquote(unquote(path))))  # %2e%2e%2f (twice encoded too)
    if not is_within(full, roots) or not is_within(decoded, roots):
        return None, f"{full} is outside the allowed roots ({', '.join(roots) or 'none configured'})"
    if not os.path.isdir(full):
        return None, f"{full}: no such directory"
    return full, None


def imports_dir() -> Path:
    """Where imported bundles are unpacked (rundash's own folder; see `importer`)."""
    return cache_dir() / "imports"


def read_roots(roots: list[str] | tuple[str, ...]) -> list[str]:
    """What the server may read: the allowed roots plus rundash's own imports folder (snapshots
    it unpacked itself, checked member by member). Which snapshot a session shows stays per
    session: only the ones it imported are added to its dirs."""
    return [*roots, str(imports_dir())]


def tokenizer_path(environ: dict | None = None) -> str | None:
    """The tokenizer the token views use (`RUNDASH_TOKENIZER`), if set."""
    value = (os.environ if environ is None else environ).get("RUNDASH_TOKENIZER", "").strip()
    return value or None


AI_ENV = {"base_url": ("OPENAI_BASE_URL",), "model": ("RUNDASH_AI_MODEL",), "key": ("OPENAI_API_KEY",)}


def ai_endpoint(environ: dict | None = None) -> dict[str, str | None]:
    """The AI endpoint as the Settings page shows it: base URL, model, and only whether a key is
    set ("key set" / "no key"), never the key."""
    environ = os.environ if environ is None else environ

    def first(names):
        return next((environ[n].strip() for n in names if environ.get(n, "").strip()), None)

    return {"base_url": first(AI_ENV["base_url"]), "model": first(AI_ENV["model"]),
            "key": "key set" if first(AI_ENV["key"]) else "no key"}


def theme(config_path: str | os.PathLike) -> dict[str, str]:
    """The `[theme]` table of a `.streamlit/config.toml` (empty when missing or unreadable)."""
    try:
        with open(config_path, "rb") as fh:
            table = tomllib.load(fh).get("theme", {})
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in table.items()} if isinstance(table, dict) else {}
