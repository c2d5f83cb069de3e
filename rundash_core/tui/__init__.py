"""`rundash tui DIR ...`: the runs list, run card, metrics, samples and logs in a terminal, over the
same frames as the dashboard (for SSH sessions where a browser is inconvenient).

textual is an optional extra (`pip install "rundash[tui]"`): only `main` imports it, when asked,
so the web app and the library never do. The pure text helpers (`highlight`, `plots`, `views`)
need neither textual nor rich.
"""
from __future__ import annotations

import argparse
import os
import sys

INSTALL_HINT = 'rundash tui needs the "tui" extra: pip install "rundash[tui]"  (or: pip install textual)'


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="rundash tui", description="Terminal view of LLM RL training runs.")
    p.add_argument("dirs", nargs="+", metavar="DIR", help="a run directory, or folders searched for runs")
    p.add_argument("--mask-str", default=None, metavar="REGEX",
                   help="regex whose matches in sample text are shown as '*' (default: multimodal pad tokens "
                        "such as <|image_pad|>; '' disables)")
    return p.parse_args(argv)


def main(argv: list[str]) -> int:
    """`argv[0]` is "tui"; 2 when textual is missing or an argument is wrong, else the app's exit."""
    args = parse_args(list(argv[1:]))
    try:
        import textual  # noqa: F401
    except ImportError:
        print(INSTALL_HINT, file=sys.stderr)
        return 2
    from rundash_core.io import files
    from rundash_core.settings import allowed_roots
    from rundash_core.tui.highlight import compile_mask

    dirs = [os.path.abspath(os.path.expanduser(d)) for d in args.dirs]
    missing = [d for d in dirs if not os.path.exists(d)]
    if missing:
        print(f"rundash tui: no such file or directory: {', '.join(missing)}", file=sys.stderr)
        return 2
    mask, error = compile_mask(args.mask_str)
    if error:
        print(f"rundash tui: --mask-str: {error}", file=sys.stderr)
        return 2
    from rundash_core.tui.app import RundashApp

    with files.restricted_to(allowed_roots(dirs)):  # (its asyncio tasks inherit them)
        RundashApp(dirs, mask=mask).run()
    return 0
