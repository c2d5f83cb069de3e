"""The dashboard's server: app.py as an ASGI app (`streamlit run asgi.py -- DIR...`, what `rundash`
starts), with `DeepLinkMiddleware` so a page opened by its own URL logs no 404s.

`streamlit run app.py -- DIR...` still works, only without that fix.
"""
import sys
from pathlib import Path

import streamlit as st
from starlette.middleware import Middleware

from rundash_core.deep_links import DeepLinkMiddleware

APP = Path(__file__).resolve().with_name("app.py")
sys.argv[0] = str(APP)  # app.py reads its dirs from `app.py -- DIR...` (streamlit_cache.startup)


def _base_path() -> str:
    return st.get_option("server.baseUrlPath") or ""


app = st.App(str(APP), middleware=[Middleware(DeepLinkMiddleware, base_path=_base_path)])
