"""Fixtures of the browser tier (its plain helpers: `tests/helpers/browser.py`)."""
from __future__ import annotations

import pytest
from playwright.sync_api import sync_playwright

from helpers.browser import CHROMIUM, CHROMIUM_ARGS


@pytest.fixture(scope="module")
def browser():
    """One Chromium per test module (a page per test: `helpers.browser.fresh_page`)."""
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()
