"""`rundash`: one command, several verbs. With no verb it starts the dashboard (`rundash [DIR ...]`);
`rundash status RUN_DIR`, `rundash check-in RUN_DIR`, `rundash tui DIR` read the same frames in a
terminal. Each verb lives in its own module, imported only when asked for."""
from __future__ import annotations

import importlib
import sys

# verb -> module with a `main(argv) -> int`
VERBS = {
    "status": "rundash_core.cli_status",
    "check-in": "rundash_core.cli_status",
    "tui": "rundash_core.tui",
}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in VERBS:
        try:
            module = importlib.import_module(VERBS[argv[0]])
        except ImportError as e:
            raise SystemExit(f"rundash {argv[0]}: not available ({e}); see the README for its extra") from e
        return module.main(argv)
    from . import launch

    return launch.main(argv)


def app_path():
    """Where the dashboard's app.py is (see `launch.app_path`)."""
    from . import launch

    return launch.app_path()


if __name__ == "__main__":
    raise SystemExit(main())
