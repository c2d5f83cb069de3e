"""Harbor trial trees as Lego-RL writes them (`docs/formats/swe-lego-rl.md` sections 1.3, 2, 3, 4).

An exp dir is `harbor_trials/<project>/<exp>[-YYYYMMDD-HHMMSS]/`; it holds rollout folders
`step_NNNN/` (NNNN: the agent loop's `global_steps`; in fully-async runs a rollouter sample
counter, not the trainer step), each holding trial dirs `<task_slug>-<hex8>/`.

A trial is read from `result.json` and `verifier/reward.txt` only (plus `exception.txt` when
result.json does not say why the trial failed); trajectories are never opened here. Rows are kept
in `cache.shared`, one entry per exp dir (`ExpDirTrials`, shared by every Run of it), per trial
dir with the identity it was read at: result.json's FileId (Harbor writes it last), or for a trial
still being written the FileIds of reward.txt and exception.txt too. A refresh stats each trial's
result.json and reads only new or changed trials. (One cache entry per trial would make the
shared LRU's per-insert bookkeeping the bottleneck: 16k trials took minutes.)
"""
from __future__ import annotations

import hashlib
import math
import os
import re
import threading
from dataclasses import dataclass

import pandas as pd

from rundash_core import cache
from rundash_core.io.configs import dig
from rundash_core.io.files import OUTSIDE_ROOTS, file_id, inside_roots, is_dir
from rundash_core.numbers import finite_float
from rundash_core.sources.swe_lego_rl.harbor_values import TOKEN_KEYS as _TOKEN_KEYS
from rundash_core.sources.swe_lego_rl.harbor_values import exception_txt as _exception_txt
from rundash_core.sources.swe_lego_rl.harbor_values import iso_time as _time
from rundash_core.sources.swe_lego_rl.harbor_values import load_json_object
from rundash_core.sources.swe_lego_rl.harbor_values import reward_txt as _reward_txt
from rundash_core.sources.swe_lego_rl.harbor_values import tokens as _tokens
from rundash_core.sources.swe_lego_rl.harbor_values import unusable as _unusable

STEP_DIR = re.compile(r"^step_(\d{1,18})$")  # a wider number is no step: it would not fit int64 columns
EXP_STAMP = re.compile(r"^(.*)-(\d{8})-(\d{6})$")
TRIAL_HEX = re.compile(r"-[0-9a-f]{6,}$")
REPO_NUMBER = re.compile(r"-\d+$")
NAMED_EXP = re.compile(rb"(/[^\s\"'=()]*?/harbor_trials/[^\s\"'=()]+?/[^\s\"'=()/]+)/step_\d+")  # spec 1.3
_TRIALS = b"/harbor_trials/"
_STEP_AT = re.compile(rb"/step_\d+")
_PATH_ENDS = (b" ", b"\t", b"\n", b"\r", b"\f", b"\v", b'"', b"'", b"=", b"(", b")")  # NAMED_EXP's [^\s"'=()]
SIBLING_WINDOW_S = 600
RESULT, REWARD, EXCEPTION = "result.json", os.path.join("verifier", "reward.txt"), "exception.txt"
_URL_SAFE = re.compile(r"[A-Za-z0-9_.~-]+")

TRIAL_COLUMNS = ("sample_id", "step", "task_id", "capability", "reward", "ok", "exception_type", "exception",
                 "n_input_tokens", "n_output_tokens", "n_cache_tokens", "turns", "started", "duration_s",
                 "problem", "locator")


# Names --------------------------------------------------------------------------------------------
def task_id_of(trial_name: str) -> str:
    """Spec 4: the trial dir name without its `-<hex>` suffix."""
    return TRIAL_HEX.sub("", trial_name)


def capability_of(task_id: str) -> str:
    """Spec 4: the repo, i.e. the task id without its trailing `-<number>`."""
    return REPO_NUMBER.sub("", task_id)


def trial_sample_id(step: int, trial_name: str) -> str:
    """`<step>-<trial dir name>`: short, URL-safe, the same on every restart (a name with
    characters a URL would escape is replaced by its hash)."""
    if not _URL_SAFE.fullmatch(trial_name):
        trial_name = hashlib.sha1(trial_name.encode("utf-8", "surrogateescape")).hexdigest()[:12]
    return f"{step}-{trial_name}"


def step_number(name: str) -> int | None:
    m = STEP_DIR.match(name)
    return int(m.group(1)) if m else None


# Linking a log to its exp dirs (spec 1.3) --------------------------------------------------------
def named_exp_dirs(data: bytes) -> list[str]:
    """Exp dirs named by `<exp dir>/step_N` paths in some log bytes, in order of first appearance."""
    return list(dict.fromkeys(d.decode("utf-8", "replace") for d in _named(data, 0, len(data))))


def names_exp_dirs(data: bytes, lo: int, hi: int) -> bool:
    """Whether `data[lo:hi]` names an exp dir (detection)."""
    return next(_named(data, lo, hi), None) is not None


def _named(data: bytes, lo: int, hi: int):
    """NAMED_EXP's group 1 over data[lo:hi], found in one pass per path token (a run of bytes
    without whitespace, quotes, `=` or parentheses): the lazy regex itself is cubic on a long
    slash-separated token (a base64 blob on a trial's log line), 30 s for 64 KB."""
    hit = data.find(_TRIALS, lo, hi)
    while hit >= 0:
        start = max(max(data.rfind(s, lo, hit) for s in _PATH_ENDS) + 1, lo)
        ends = [e for s in _PATH_ENDS if (e := data.find(s, hit, hi)) >= 0]
        end = min(ends) if ends else hi
        yield from _token_exp_dirs(data, start, end)
        hit = data.find(_TRIALS, end, hi)


def _token_exp_dirs(data: bytes, pos: int, end: int):
    """The regex's matches in one token: from its first `/` before a `/harbor_trials/`, up to the
    first `/<exp>/step_<digit>` after it (the project part non-empty, `<exp>` without `/`); when
    the first such occurrence finds none, no later start or occurrence can."""
    while (hit := data.find(_TRIALS, pos, end)) >= 0:
        first = data.find(b"/", pos, hit)
        if first < 0:  # the occurrence's own `/` starts a match only with a later occurrence
            first, hit = hit, data.find(_TRIALS, hit + 1, end)
            if hit < 0:
                return
        after = hit + len(_TRIALS) + 1  # (the project part takes one byte at least)
        for step in _STEP_AT.finditer(data, after, end):
            slash = data.rfind(b"/", after, step.start())
            if 0 <= slash < step.start() - 1:
                yield data[first:step.start()]
                pos = step.end()
                break
        else:
            return


def _stamp(name: str) -> tuple[str, float] | None:
    m = EXP_STAMP.match(name)
    if not m:
        return None
    try:
        t = pd.Timestamp(f"{m.group(2)}T{m.group(3)}").timestamp()
    except ValueError:
        return None
    return m.group(1), t


def has_step_folder(path: str) -> bool:
    try:
        with os.scandir(path) as it:
            return any(STEP_DIR.match(e.name) and e.is_dir() for e in it)
    except OSError:
        return False


def _subdirs(path: str) -> list[str]:
    try:
        with os.scandir(path) as it:
            return sorted(e.name for e in it if not e.name.startswith(".") and e.is_dir())
    except OSError:
        return []


def expand_siblings(dirs: list[str]) -> list[str]:
    """Spec 1.3 step 2: add the `<stem>-YYYYMMDD-HHMMSS` dirs next to a stamped one (same stem,
    stamp within 600 s, at least one step_* child): the other nodes of a multi-node run."""
    out = list(dict.fromkeys(dirs))
    for d in list(out):
        parent, mine = os.path.split(d.rstrip(os.sep))
        own = _stamp(mine)
        if own is None:
            continue
        for name in _subdirs(parent):
            other = _stamp(name)
            path = os.path.join(parent, name)
            if (other and other[0] == own[0] and abs(other[1] - own[1]) <= SIBLING_WINDOW_S and path not in out
                    and has_step_folder(path)):
                out.append(path)
    return out


def workdir_trials(log_path: str) -> str | None:
    """`<workdir>/harbor_trials` for a log at `<workdir>/logs/<exp>.log`, when it exists."""
    logs = os.path.dirname(os.path.abspath(log_path))
    if os.path.basename(logs) != "logs":
        return None
    trials = os.path.join(os.path.dirname(logs), "harbor_trials")
    return trials if is_dir(trials) and inside_roots(trials) else None  # one stat per folder within a discovery pass


def _is_exp_name(name: str, exp: str) -> bool:
    stamped = _stamp(name)
    return name == exp or (stamped is not None and stamped[0] == exp)


def sibling_exp_dirs(log_path: str, exp: str) -> list[str]:
    """`<workdir>/harbor_trials/<project>/<exp>` and `<exp>-YYYYMMDD-HHMMSS` next to the log's
    `logs/` folder. Exact names only: run `r-1` must not pick up `r-10`'s trials."""
    root = workdir_trials(log_path)
    if root is None:
        return []
    return [os.path.join(root, p, n) for p in _subdirs(root) for n in _subdirs(os.path.join(root, p))
            if _is_exp_name(n, exp)]


def local_copy(named: str, log_path: str) -> str | None:
    """A named exp dir under a cluster mount (`/mnt/shared/.../harbor_trials/p/e`) that is not on
    this machine, found at the same `<project>/<exp>` under the log's own workdir."""
    root = workdir_trials(log_path)
    tail = named.split("/harbor_trials/", 1)[-1]
    if root is None or not tail:
        return None
    path = os.path.join(root, *tail.split("/"))
    return path if os.path.isdir(path) and inside_roots(path) else None


# Listing -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Folder:
    """One `step_NNNN` folder of one exp dir and the trial dirs in it (names sorted); `odd`: its
    entries that cannot be read as trials, with why (a broken link, a file, a link outside the roots)."""

    exp_dir: str
    name: str
    step: int
    trials: tuple[str, ...]
    odd: tuple[tuple[str, str], ...] = ()

    @property
    def path(self) -> str:
        return os.path.join(self.exp_dir, self.name)


def list_folders(exp_dirs: list[str]) -> list[Folder]:
    """Every step folder of the exp dirs, by step number (not name: step_10000 > step_9999)."""
    out = []
    for exp in exp_dirs:
        for name in _subdirs(exp):
            n = step_number(name)
            if n is not None:
                path = os.path.join(exp, name)
                outside = os.path.islink(path) and not inside_roots(path)  # (not listed: names leak too)
                out.append(Folder(exp, name, n, (), (("", OUTSIDE_ROOTS),)) if outside
                           else Folder(exp, name, n, *_trial_entries(path)))
    return sorted(out, key=lambda f: (f.step, f.exp_dir))


def _trial_entries(folder: str) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """A step folder's trial dirs, and the entries that are none (so they are named, not lost);
    only links cost a stat more (a listing of thousands of trials stays one scandir)."""
    dirs, odd = [], []
    try:
        with os.scandir(folder) as it:
            for e in it:
                if e.name.startswith("."):
                    continue
                link = e.is_symlink()
                if link and not inside_roots(e.path):
                    odd.append((e.name, OUTSIDE_ROOTS))
                elif e.is_dir():
                    dirs.append(e.name)
                else:
                    odd.append((e.name, "broken symlink" if link and not os.path.exists(e.path) else "a file"))
    except OSError as e:
        odd.append(("", f"cannot be listed ({e.strerror or e})"))
    return tuple(sorted(dirs)), tuple(sorted(odd))


def odd_step_names(exp_dir: str) -> list[str]:
    """`step_*` folders of an exp dir that are no rollout folder (`step_x`, or a number past
    18 digits), so they are named rather than silently left out."""
    return [n for n in _subdirs(exp_dir) if n.startswith("step_") and step_number(n) is None]


def newest_finish(exp_dirs: list[str], max_trials: int = 256) -> float | None:
    """The last `finished_at` (epoch seconds) among the trials of the newest step folder of the
    exp dirs (up to `max_trials` of them; rows kept in the shared trial cache): a run's last
    logged time when its log prints none."""
    newest = None
    for exp in exp_dirs:
        steps = [(n, name) for name in _subdirs(exp) if (n := step_number(name)) is not None]
        if steps:
            n, name = max(steps)
            if newest is None or n > newest.step:
                newest = Folder(exp, name, n, tuple(_subdirs(os.path.join(exp, name)))[:max_trials])
    if newest is None:
        return None
    col = {c: i for i, c in enumerate(TRIAL_COLUMNS)}
    ends = [row[col["started"]] / 1e9 + row[col["duration_s"]] for row in exp_dir_trials(newest.exp_dir).rows(newest)
            if row[col["started"]] is not None and row[col["duration_s"]] is not None]
    return max(ends) if ends else None


# Reading one trial (spec 3.3, 4; values: harbor_values) --------------------------------------------
def read_trial(trial_dir: str, step: int, sample_id: str) -> tuple:
    """One row of TRIAL_COLUMNS for a trial dir; never raises."""
    name = os.path.basename(trial_dir)
    task = task_id_of(name)
    result_path = os.path.join(trial_dir, RESULT)
    fid = file_id(result_path)
    result, problem = (None, None)
    if fid is None:
        problem = "no result.json (trial still running, or it died)" if not os.path.lexists(result_path) \
            else "result.json is not a readable file"
    else:
        result, problem = load_json_object(result_path, fid)
    reward, why = _reward_txt(os.path.join(trial_dir, REWARD))
    problem = problem or why
    if reward is None:  # spec 4: reward.txt first, then verifier_result.rewards.reward
        reward = finite_float(dig(result, "verifier_result", "rewards", "reward"))
    info = dig(result, "exception_info")
    exc_type = exc_msg = None
    if isinstance(info, dict):
        exc_type = str(info.get("exception_type") or "unknown")
        exc_msg = str(info.get("exception_message") or "")
    elif os.path.lexists(os.path.join(trial_dir, EXCEPTION)):
        exc_type, exc_msg = _exception_txt(os.path.join(trial_dir, EXCEPTION))
    ok = False if exc_type is not None else (True if result is not None else None)
    started, finished = _time(dig(result, "started_at")), _time(dig(result, "finished_at"))
    duration = (finished - started) / 1e9 if started is not None and finished is not None else None
    tokens = _tokens(dig(result, "agent_result"))
    problem = problem or _unusable(result)
    return (sample_id, step, task, capability_of(task), reward, ok, exc_type, exc_msg, *tokens, None,
            started, duration, problem, trial_dir)


def trial_ident(trial_dir: str) -> tuple:
    """What says a trial changed: result.json's FileId (Harbor writes it last); for a trial
    without one (still running, or it died), the FileIds of reward.txt and exception.txt too."""
    fid = file_id(os.path.join(trial_dir, RESULT))
    if fid is not None:
        return (fid,)
    return None, file_id(os.path.join(trial_dir, REWARD)), file_id(os.path.join(trial_dir, EXCEPTION))


class ExpDirTrials:
    """The trial rows read so far from one exp dir, kept in `cache.shared` (one entry per exp dir,
    shared by every Run): per folder, per trial dir, the row and the identity it was read at. A
    refresh stats each listed trial and reads only the new or changed ones; a trial that could
    not be read (I/O error) is read again next time."""

    def __init__(self, exp_dir: str):
        self.exp_dir = exp_dir
        self._lock = threading.Lock()
        self._rows: dict[str, dict[str, tuple[tuple, tuple]]] = {}  # folder -> trial -> (ident, row)

    @property
    def nbytes(self) -> int:
        return 1024 + 1200 * sum(len(r) for r in self._rows.values())

    def rows(self, folder: Folder) -> list[tuple]:
        """The trial rows (TRIAL_COLUMNS) of one step folder, trials in name order."""
        with self._lock:
            old, new = self._rows.get(folder.name, {}), {}
            for name in folder.trials:
                path = os.path.join(folder.path, name)
                ident = trial_ident(path)
                kept = old.get(name)
                if kept is None or kept[0] != ident:
                    kept = (ident, read_trial(path, folder.step, trial_sample_id(folder.step, name)))
                    if kept[1][-2] is not None and "cannot be read" in kept[1][-2]:
                        kept = (None, kept[1])  # an I/O error: read again next time
                new[name] = kept
            self._rows[folder.name] = new
            return [new[name][1] for name in folder.trials]

    def forget_except(self, names: set[str]) -> None:
        """Drop what was kept of folders that are gone."""
        with self._lock:
            for name in [n for n in self._rows if n not in names]:
                del self._rows[name]


def exp_dir_trials(exp_dir: str) -> ExpDirTrials:
    return cache.shared.get_or_create(("harbor-exp", os.path.realpath(exp_dir)), lambda: ExpDirTrials(exp_dir))


def read_folders(folders: list[Folder]) -> pd.DataFrame:
    """The trial rows of some folders (through the exp dirs' shared state), as one frame."""
    rows = [row for f in folders for row in exp_dir_trials(f.exp_dir).rows(f)]
    cache.shared.evict()  # the exp dirs' entries grew
    return trial_frame(rows)


def trial_frame(rows: list[tuple]) -> pd.DataFrame:
    cols = list(zip(*rows)) if rows else [()] * len(TRIAL_COLUMNS)
    c = dict(zip(TRIAL_COLUMNS, cols))
    frame = pd.DataFrame({
        "sample_id": pd.array(c["sample_id"], dtype="str"), "step": pd.array(c["step"], dtype="Int64"),
        "task_id": pd.array(c["task_id"], dtype="str"), "capability": pd.array(c["capability"], dtype="str"),
        "reward": pd.array([math.nan if r is None else r for r in c["reward"]], dtype="float64"),
        "ok": pd.array(c["ok"], dtype="boolean"),
        "exception_type": pd.array(c["exception_type"], dtype="str"),
        "exception": pd.array(c["exception"], dtype="str"),
        **{k: pd.array(c[k], dtype="Int64") for k in (*_TOKEN_KEYS, "turns")},
        "started": pd.to_datetime(pd.array(c["started"], dtype="Int64"), unit="ns", utc=True),
        "duration_s": pd.array([math.nan if d is None else d for d in c["duration_s"]], dtype="float64"),
        "problem": pd.array(c["problem"], dtype="str"), "locator": pd.array(c["locator"], dtype="str"),
    })
    return frame[list(TRIAL_COLUMNS)]
