"""Where a run's `tokenizer.json` is, and loading it: local files only, never a network fetch.

Looked for, in order: `RUNDASH_TOKENIZER` (a tokenizer.json, or a folder holding one: the
operator's choice wins), the model folder when the model named in the run is a local folder under
the allowed roots, then the Hugging Face cache (`$HF_HUB_CACHE`, `$HF_HOME/hub` or
`~/.cache/huggingface/hub`: `models--<org>--<name>/snapshots/*/tokenizer.json`). The setting and
the cache are the operator's own folders, so they are read even outside the allowed roots; a model
folder named by a run's config is read only inside them. Loaded tokenizers are kept in a small LRU
keyed by path, size and mtime, so an edited file is loaded again.
"""
from __future__ import annotations

import errno
import functools
import glob
import os
import re
import stat
from dataclasses import dataclass, field

from tokenizers import Tokenizer

from . import settings
from .io import files

FILE_NAME = "tokenizer.json"
MAX_BYTES = 256 << 20  # the largest tokenizer.json rundash loads (real ones are 2-35 MB)
_REPO_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?")  # 'org/name' or 'name'


@dataclass
class TokenizerLookup:
    """The tokenizer found for a run (or None), and every place looked, for the page's caption."""

    tokenizer: Tokenizer | None = None
    path: str | None = None            # the tokenizer.json loaded
    origin: str | None = None          # 'RUNDASH_TOKENIZER', 'model folder' or 'Hugging Face cache'
    looked: list[str] = field(default_factory=list)  # each place tried, and why it did not serve
    error: str | None = None           # a tokenizer.json found but not loadable, and why


def hf_hub_dir(environ: dict | None = None) -> str:
    """The Hugging Face hub cache folder, as `huggingface_hub` resolves it."""
    environ = os.environ if environ is None else environ
    if environ.get("HF_HUB_CACHE"):
        return os.path.expanduser(environ["HF_HUB_CACHE"])
    if environ.get("HF_HOME"):
        return os.path.join(os.path.expanduser(environ["HF_HOME"]), "hub")
    xdg = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(xdg, "huggingface", "hub")


def _regular(path: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def hf_cached_file(hub: str, repo_id: str) -> str | None:
    """`tokenizer.json` of a cached repo: the snapshot `refs/main` names first, else the newest."""
    if not _REPO_ID.fullmatch(repo_id) or ".." in repo_id:
        return None
    repo = os.path.join(hub, "models--" + repo_id.replace("/", "--"))
    candidates = []
    try:
        with open(os.path.join(repo, "refs", "main"), "rb") as fh:
            ref = fh.read(100).decode("ascii", "replace").strip()
        if re.fullmatch(r"[0-9a-f]{6,64}", ref):
            candidates.append(os.path.join(repo, "snapshots", ref, FILE_NAME))
    except OSError:
        pass

    def _mtime(p: str) -> float:
        return files.mtime(p) or 0.0

    candidates += sorted(glob.glob(os.path.join(glob.escape(repo), "snapshots", "*", FILE_NAME)), key=_mtime,
                         reverse=True)
    return next((p for p in candidates if _regular(p)), None)


def _read(path: str, *, inside_roots: bool) -> bytes:
    """The file's bytes: through `files.open_file` (roots checked) for a run's model folder; for the
    operator's own folders the same regular-file check without the roots. Raises OSError."""
    if inside_roots:
        fh = files.open_file(path)
    else:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(errno.EINVAL, files.NOT_REGULAR, path)
        except BaseException:
            os.close(fd)
            raise
        fh = os.fdopen(fd, "rb")
    with fh:
        data = fh.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise OSError(errno.EFBIG, f"larger than {MAX_BYTES >> 20} MB", path)
    return data


@functools.lru_cache(maxsize=4)
def _load(path: str, size: int, mtime_ns: int, inside_roots: bool) -> Tokenizer:
    """(size and mtime_ns are the cache key: a rewritten file is loaded again.)"""
    return Tokenizer.from_str(_read(path, inside_roots=inside_roots).decode("utf-8"))


def load_tokenizer(path: str, *, inside_roots: bool = False) -> Tokenizer:
    """A tokenizer.json loaded (cached). Raises OSError / ValueError / tokenizers' Exception."""
    st = os.stat(path)
    return _load(os.path.realpath(path), st.st_size, st.st_mtime_ns, inside_roots)


def _candidates(model_names: list[str], environ: dict | None) -> list[tuple[str, str, str | None, bool]]:
    """(origin, where, tokenizer.json or None, read inside roots only) for each place to look."""
    out = []
    setting = settings.tokenizer_path(environ)  # RUNDASH_TOKENIZER: a tokenizer.json or a folder holding one
    if setting:
        setting = os.path.abspath(os.path.expanduser(setting))
        path = os.path.join(setting, FILE_NAME) if os.path.isdir(setting) else setting
        out.append(("RUNDASH_TOKENIZER", setting, path if _regular(path) else None, False))
    hub = hf_hub_dir(environ)
    for name in model_names:
        local = os.path.expanduser(name)
        if os.path.isabs(local):
            path = os.path.join(local, FILE_NAME)
            if not files.inside_roots(local):
                out.append(("model folder", f"{local} ({files.OUTSIDE_ROOTS})", None, True))
            else:
                out.append(("model folder", local, path if files.file_id(path) else None, True))
        elif _REPO_ID.fullmatch(name):
            out.append(("Hugging Face cache", os.path.join(hub, "models--" + name.replace("/", "--")),
                        hf_cached_file(hub, name), False))
    return out


def find_tokenizer(model_names: list[str], *, environ: dict | None = None) -> TokenizerLookup:
    """The first loadable tokenizer.json for these model names (see the module doc for the order)."""
    lookup = TokenizerLookup()
    for origin, where, path, inside in _candidates(model_names, environ):
        if path is None:
            lookup.looked.append(f"{origin}: {where} (no {FILE_NAME})")
            continue
        try:
            tokenizer = load_tokenizer(path, inside_roots=inside)
        except Exception as e:  # noqa: BLE001 (tokenizers raises its own Exception on a bad file)
            text = f"{path} could not be loaded ({type(e).__name__}: {str(e)[:200]})"
            lookup.looked.append(f"{origin}: {text}")
            lookup.error = lookup.error or text
            continue
        lookup.looked.append(f"{origin}: {path}")
        lookup.tokenizer, lookup.path, lookup.origin = tokenizer, path, origin
        return lookup
    if not lookup.looked:
        lookup.looked.append("no model name in the run and RUNDASH_TOKENIZER not set")
    return lookup
