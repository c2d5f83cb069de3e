"""Import: add a run directory from under the allowed roots, or upload a run bundle (.zip /
.tar.gz) that becomes a read-only snapshot in rundash's cache folder, for this session."""
import streamlit as st

from pages import _ui
from rundash_core.safety import importer
from rundash_core.views.display_text import md_code, md_escape

_ui.ensure_app_ran()
roots = list(st.session_state.get("_roots", ()))


def _add_for_session(path: str, *, snapshot: bool) -> None:
    """Track `path` in this session (a snapshot's folder becomes one of its roots too)."""
    if snapshot and path not in st.session_state.setdefault("import_roots", []):
        st.session_state["import_roots"].append(path)
    if path not in st.session_state.setdefault("extra_dirs", []):
        st.session_state["extra_dirs"].append(path)
    st.session_state["import_note"] = ("success", f"Added {md_code(path)}: its runs are in the sidebar's run selector.")


def _load_dir() -> None:
    """The Load button's callback (runs before the script: the sidebar already lists the dir)."""
    full, error = importer.check_import_dir(st.session_state.get("import_path", ""),
                                            list(st.session_state.get("_roots", ())))
    if error:
        st.session_state["import_note"] = ("error", md_escape(error))
    else:
        _add_for_session(full, snapshot=False)


st.markdown("## Import")
if note := st.session_state.pop("import_note", None):
    (st.success if note[0] == "success" else st.error)(note[1])

st.markdown("#### A run directory")
st.text_input("Directory path", placeholder=roots[0] if roots else "", key="import_path",
              help="An output folder or a run folder below the allowed roots.")
st.button("Load", on_click=_load_dir)
st.caption("Allowed roots: " + (", ".join(md_code(r) for r in roots) or "none"))

st.markdown("#### A run bundle")
cap_mb = importer.max_bytes() >> 20
st.caption(f"A `.zip` or `.tar.gz` of run folders, at most {cap_mb} MB (`RUNDASH_IMPORT_MAX_MB`). It is unpacked "
           "into rundash's cache as a read-only snapshot; links, absolute paths and `..` are refused.")
upload = st.file_uploader("Run bundle", type=["zip", "gz", "tgz", "tar"])
if upload is not None and st.session_state.get("import_done") != upload.file_id:
    try:
        with st.spinner("Unpacking…"):
            folder = importer.import_bundle(upload.name, upload.getvalue(), limit=importer.max_bytes())
    except importer.ImportRefused as e:
        st.error(f"Not imported: {md_escape(str(e))}")
    else:
        st.session_state["import_done"] = upload.file_id
        _add_for_session(str(folder), snapshot=True)
        st.rerun()  # the sidebar lists the new runs

if imported := st.session_state.get("import_roots"):
    st.markdown("#### Imported in this session")
    for folder in imported:
        st.markdown(md_code(folder))
