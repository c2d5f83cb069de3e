"""Files and folders of a run that exist but cannot be read (mode 000, another user's).

Listings pass over them (a folder that cannot be listed has no entries, a file that cannot be
opened has no lines), so without this the run looked complete. Every kind names them here, once.
"""
from __future__ import annotations

from rundash_core.io.files import shown_path, unreadable_below
from rundash_core.run import Problem


def unreadable_problems(roots: list[str], known: list[Problem] = ()) -> list[Problem]:
    """A Problem for each unreadable path below `roots` (files or folders), except paths `known`
    already names."""
    named = {p.path for p in known}
    out = []
    for root in roots:
        for path, why in unreadable_below(root):
            if path not in named and shown_path(path) not in named:
                named.add(path)
                out.append(Problem(shown_path(path), f"cannot be read ({why}): not shown"))
    return out
