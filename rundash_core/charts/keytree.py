"""All-metrics mode: every logged key nested along its "/" path, behind a user's regex filter
(RE2: no pattern can stall the server)."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from rundash_core.safety.user_regex import compile_user_pattern


@dataclass
class Node:
    """One level of the key tree. `path` is the "/"-joined prefix ("" at the root); `keys` are the
    full keys that end at this level (`train/agg/x` is in the keys of node `train/agg`), sorted;
    children are the deeper levels, in the order of their first key. A page renders a node as an expander holding its keys' charts
    and its children's expanders."""

    name: str
    path: str
    keys: list[str] = field(default_factory=list)
    children: list[Node] = field(default_factory=list)

    @property
    def n_keys(self) -> int:
        """Keys at this level and below (for expander labels)."""
        return len(self.keys) + sum(c.n_keys for c in self.children)

    def all_keys(self) -> list[str]:
        return [*self.keys, *(k for c in self.children for k in c.all_keys())]


def key_tree(keys: Iterable[str], *, pattern: str | None = None, max_depth: int | None = None) -> Node:
    """Every key (filtered by `pattern`, a case-insensitive regex searched in the full key) nested
    along its "/" path. With `max_depth`, levels below it are not split further: their keys sit in
    the node at max_depth. Raises ValueError for an invalid pattern."""
    rx = None
    if pattern:  # a user's pattern: RE2, linear time
        rx, error = compile_user_pattern(pattern)
        if error:
            raise ValueError(f"invalid regex {pattern!r}: {error}")
    root = Node("", "")
    index: dict[str, Node] = {"": root}
    for key in sorted({str(k) for k in keys}):
        if rx is not None and not rx.search(key):
            continue
        parts = key.split("/")[:-1]
        if max_depth is not None:
            parts = parts[:max(max_depth, 0)]
        node, path = root, ""
        for part in parts:
            path = f"{path}/{part}" if path else part
            child = index.get(path)
            if child is None:
                child = index[path] = Node(part, path)
                node.children.append(child)
            node = child
        node.keys.append(key)
    return root
