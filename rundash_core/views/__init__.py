"""What pages show, computed without Streamlit: plain functions over the run contract's frames."""
