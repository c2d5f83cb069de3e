"""`rundash`: one command, several verbs. With no verb it starts the dashboard (`rundash [DIR ...]`);
`rundash status RUN_DIR`, `rundash check-in RUN_DIR`, `rundash tui DIR` read the same frames in a
terminal. Each verb lives in its own module, imported only when asked for; `rundash --help` lists
them (VERB_HELP) with the server options."""
from __future__ import annotations

import importlib
import sys

# verb -> module with a `main(argv) -> int`
VERBS = {
    "status": "rundash_core.serve.cli_status",
    "check-in": "rundash_core.serve.cli_status",
    "tui": "rundash_core.tui",
}
# verb -> its usage and one line, listed by `rundash --help` (each verb's own --help says more)
VERB_HELP = {
    "status": ("RUN_DIR [--json]", "a run's card, key metrics and health findings (a table, or JSON)"),
    "check-in": ("RUN_DIR", "the monitor-run check-in entry for a run, as Markdown"),
    "tui": ("DIR ...", "the runs, their cards, metrics, samples and logs in a terminal"),
}


def verbs_help() -> str:
    """The verbs block of `rundash --help`: one line per verb."""
    width = max(len(f"{verb} {usage}") for verb, (usage, _line) in VERB_HELP.items())
    lines = [f"  rundash {f'{verb} {usage}':<{width}}  {line}" for verb, (usage, line) in VERB_HELP.items()]
    return "commands (rundash COMMAND --help for each):\n" + "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in VERBS:
        try:
            module = importlib.import_module(VERBS[argv[0]])
        except ImportError as e:
            raise SystemExit(f"rundash {argv[0]}: not available ({e}); see the README for its extra") from e
        return module.main(argv)
    from rundash_core.serve import launch

    return launch.main(argv)


def app_path():
    """Where the dashboard's app.py is (see `launch.app_path`)."""
    from rundash_core.serve import launch

    return launch.app_path()


if __name__ == "__main__":
    raise SystemExit(main())
