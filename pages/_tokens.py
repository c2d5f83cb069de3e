"""The Trajectory page's token views of one episode (per-token table for now)."""
import pandas as pd
import streamlit as st


def token_panel(run, episode) -> None:
    """The episode's token streams, when the source recorded them."""
    tokens = episode.tokens
    if isinstance(tokens, pd.DataFrame) and not tokens.empty:
        with st.expander(f"Tokens ({len(tokens):,}{', first 2,000 shown' if len(tokens) > 2000 else ''})"):
            st.dataframe(tokens.head(2000), hide_index=True)
