"""One escape form for text that is not UTF-8 (issue 24): a file name's byte as `\\xff` everywhere."""
import os

from rundash_core.io.files import shown_path
from rundash_core.views.display_text import md_code, utf8_text


def test_a_non_utf8_name_reads_as_its_byte_in_both_helpers(tmp_path):
    os.close(os.open(os.fsencode(tmp_path) + b"/bad\xff.log", os.O_CREAT | os.O_WRONLY))
    (name,) = os.listdir(tmp_path)  # 'bad\udcff.log': a surrogate escape
    assert shown_path(name) == utf8_text(name) == "bad\\xff.log"
    assert md_code(name) == "`bad\\xff.log`"
    assert utf8_text(ValueError(name)) == "bad\\xff.log"


def test_a_lone_surrogate_that_is_no_byte_is_written_as_code_point_and_text_is_sendable():
    for text in ("x\ud800y", "\udc00", "ok \U0001f600"):
        out = utf8_text(text)
        out.encode("utf-8")  # would raise on a surrogate left in
    assert utf8_text("x\ud800y") == "x\\ud800y"
    assert utf8_text("plain é") == "plain é"
