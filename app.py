"""rundash: navigation and the shared sidebar (run selector, directories, problems).

Start: `streamlit run app.py -- DIR...` (or `rundash DIR...`); RUNDASH_DIRS instead of DIRs; with no
directory, the built-in demo.

`streamlit run` first reads this file for an ASGI app (`st.App`): it finds `app` below, serves this
same file through it behind `DeepLinkMiddleware` (a page opened by its own URL finds the server at
the first try: no 404s in the browser console, streamlit/streamlit#7074), and then runs it as the
script (`__main__`), which is the dashboard.
"""
import logging

import streamlit as st

if __name__ != "__main__":  # imported by `streamlit run` to find its ASGI app
    from starlette.middleware import Middleware

    from rundash_core.serve.deep_links import DeepLinkMiddleware

    app = st.App(__file__, middleware=[Middleware(DeepLinkMiddleware,
                                                  base_path=lambda: st.get_option("server.baseUrlPath") or "")])
else:
    from pages import _ui
    from rundash_core import streamlit_cache as sc

    with _ui.app_run():  # (the pages can tell they run through app.py: `_ui.ensure_app_ran`)
        nav = _ui.navigation()  # first: a session's first run reruns from here, before any widget
        dirs, roots, is_demo = sc.startup()
        try:
            run = _ui.sidebar(dirs, roots, is_demo)
        except Exception as e:  # noqa: BLE001 - the sidebar is guarded like a page: a message, the pages still open
            logging.getLogger("rundash").exception("sidebar failed")
            with st.sidebar:
                _ui.page_failed(e, None)
            run = None

        try:
            if run is not None:
                _ui.run_card(run, compact=nav.title != "Overview")  # the run card on every page
                _ui.live_watch(run)  # a run that looked stopped when the page opened may start again
            nav.run()
        except Exception as e:  # noqa: BLE001 - what no reader foresaw: a message, never Streamlit's error page
            logging.getLogger("rundash").exception("page %r failed (run %s)", nav.title, getattr(run, "path", None))
            _ui.page_failed(e, run)
