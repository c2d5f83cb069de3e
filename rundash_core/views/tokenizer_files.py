"""Where a run's `tokenizer.json` is, and loading it: local files only, never a network fetch.

Looked for, in order: `RUNDASH_TOKENIZER` (a tokenizer.json, or a folder holding one: the
operator's choice wins), then per model name of the run (`model_names`: the trace's, the
config's, the run card's): a local model folder's `tokenizer.json` (a folder under the allowed
roots, or inside the Hugging Face cache; a snapshot path also names its repo), and the Hugging Face
cache (`$HF_HUB_CACHE`, `$HF_HOME/hub` or `~/.cache/huggingface/hub`:
`models--<org>--<name>/snapshots/*/tokenizer.json`; a name without an org: any org's). The setting
and the cache are the operator's own folders, so they are read even outside the allowed roots; a
model folder named by a run's config is read only inside them, and only its `tokenizer.json`
(never another file a run names). Loaded tokenizers are kept in a small LRU keyed by path, size and
mtime, so an edited file is loaded again.
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

from rundash_core import settings
from rundash_core.io import files
from rundash_core.io.configs import dig

FILE_NAME = "tokenizer.json"
MAX_BYTES = 256 << 20  # the largest tokenizer.json rundash loads (real ones are 2-35 MB)
_REPO_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?")  # 'org/name' or 'name'
_SNAPSHOT = re.compile(r"(?:^|/)models--([A-Za-z0-9][\w.-]*?)--([A-Za-z0-9][\w.-]*)(?:/|$)")  # a hub cache path


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


def hf_repo_dirs(hub: str, repo_id: str) -> list[str]:
    """The cache folders of a repo id: `models--<org>--<name>`; for a bare name (a local folder's
    name, e.g. `Qwen3-8B`), `models--<name>` and every org's `models--*--<name>`."""
    if not _REPO_ID.fullmatch(repo_id) or ".." in repo_id:
        return []
    if "/" in repo_id:
        return [os.path.join(hub, "models--" + repo_id.replace("/", "--"))]
    return [os.path.join(hub, "models--" + repo_id),
            *sorted(glob.glob(os.path.join(glob.escape(hub), f"models--*--{glob.escape(repo_id)}")))]


def hf_where(hub: str, repo_id: str) -> str:
    """Where `hf_cached_file` looks, as the page names it."""
    return os.path.join(hub, "models--" + (repo_id.replace("/", "--") if "/" in repo_id else f"*--{repo_id}"))


def hf_cached_file(hub: str, repo_id: str) -> str | None:
    """`tokenizer.json` of a cached repo (`hf_repo_dirs`): the snapshot `refs/main` names first,
    else the newest."""
    return next((p for repo in hf_repo_dirs(hub, repo_id) if (p := _snapshot_file(repo)) is not None), None)


def _snapshot_file(repo: str) -> str | None:
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
            out.append(_model_folder(local, hub))
            if (m := _SNAPSHOT.search(local)) is not None:  # a cache path elsewhere: its repo in this cache
                name = f"{m.group(1)}/{m.group(2)}"
            else:
                continue
        if _REPO_ID.fullmatch(name):
            out.append(("Hugging Face cache", hf_where(hub, name), hf_cached_file(hub, name), False))
    return list(dict.fromkeys(out))


def _model_folder(local: str, hub: str) -> tuple[str, str, str | None, bool]:
    """A run's local model folder: its tokenizer.json when the folder is under the allowed roots
    (read through them), or inside the Hugging Face cache (the operator's own folder)."""
    path = os.path.join(local, FILE_NAME)
    if files.inside_roots(local):
        return "model folder", local, path if files.file_id(path) else None, True
    try:
        real, cache = os.path.realpath(local), os.path.realpath(hub)
    except (OSError, ValueError):
        real, cache = "", None
    if cache and real.startswith(cache.rstrip(os.sep) + os.sep):
        return "model folder", local, path if _regular(path) else None, False
    return "model folder", f"{local} ({files.OUTSIDE_ROOTS})", None, True


# where a run's config names its policy's tokenizer or model (a local folder or a hub id), first wins:
# prime-rl's per-component `model.name` / `tokenizer.name`, verl's actor model (and SFT's `partial_pretrain`)
CONFIG_MODEL_KEYS = (
    ("orchestrator", "tokenizer", "name"), ("trainer", "tokenizer", "name"), ("tokenizer", "name"),
    ("actor_rollout_ref", "model", "tokenizer_path"), ("actor_rollout_ref", "model", "path"),
    ("orchestrator", "model", "name"), ("trainer", "model", "name"), ("inference", "model", "name"),
    ("model", "name"), ("model", "partial_pretrain"), ("model", "path"),
)


def model_names(run, episode) -> list[str]:
    """The tokenizer names to look for: the trace's renderer model, its agent's model, the run
    config's tokenizer / model (`CONFIG_MODEL_KEYS`: a local folder stays a path), the run card's model."""
    names = []
    for trace in (episode.raw or {}).get("traces", []) if isinstance(episode.raw, dict) else []:
        agent = trace.get("agent") if isinstance(trace, dict) else None
        config = agent.get("config") if isinstance(agent, dict) else None
        if isinstance(config, dict):
            client = config.get("client") if isinstance(config.get("client"), dict) else {}
            names += [client.get("renderer_model_name"), config.get("model")]
    try:
        config = run.config()
    except Exception:  # noqa: BLE001 (an unreadable config: the other names)
        config = {}
    names += [dig(config, *keys) for keys in CONFIG_MODEL_KEYS]
    try:
        names.append(run.overview().model)
    except Exception:  # noqa: BLE001 (a run that cannot summarise itself still shows its tokens)
        pass
    return list(dict.fromkeys(n.strip() for n in names if isinstance(n, str) and n.strip()))


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
