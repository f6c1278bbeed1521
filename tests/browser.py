"""Headless Chromium for the study page's tests (tests/test_study_page.py) and its screenshots: Debian's `chromium`
(.ci/run installs it with apt where it is missing) driven by Playwright's Python package, which is told where the
browser is and never downloads one. The network is off: the context is offline and every request that is not for a
file:// or data: URL is aborted and recorded, so a page that reaches for a CDN fails its test. Also the page's
packed script elements as its script reads them (`inflated`, `unpacked`).

    python -m tests.browser PAGE.html OUT.png WIDTH     # a full-page screenshot at WIDTH CSS pixels (at most
                                                        # SCREENSHOT_BYTES: else the top of the page that fits)
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import json
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path


def inflated(page: str, element_id: str) -> str:
    """The text of the page's packed script element `element_id` (gzipped, base64: pipelines.report.html._packed),
    as study.js inflates it."""
    (packed,) = re.findall(rf'id="{element_id}">([^<]+)<', page)
    return gzip.decompress(base64.b64decode(packed.strip())).decode()


def unpacked(page: str, element_id: str):
    """The JSON of the page's packed script element `element_id` (the chart specs, the runs' records)."""
    return json.loads(inflated(page, element_id))


CHROMIUM_FLAGS = [
    "--headless=new",
    "--no-sandbox",  # the tests run as root here and in CI
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]
READY_TIMEOUT_MS = 120_000  # the page's scripts mark <body data-ready> once every chart is drawn (2 busy cores)


def chromium_path() -> str | None:
    """The Chromium to drive: $POSBENCH_CHROMIUM, else Debian's `chromium` on the PATH."""
    return os.environ.get("POSBENCH_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


def why_no_browser() -> str | None:
    """Why no browser can be had here (the tests' skip reason), or None when one can."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright's Python package is not installed (the dev extra: make env)"
    if chromium_path() is None:
        return "no Chromium on this machine (apt-get install chromium; .ci/run installs it where it can)"
    return None


@dataclass
class PageLog:
    """What a page did while it was open: console errors, uncaught exceptions, requests off the machine, console
    warnings (Vega's among them)."""

    errors: list[str] = field(default_factory=list)
    network: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


@contextlib.contextmanager
def browser() -> Iterator:
    """A Playwright Chromium browser (headless, fresh profile); the caller opens pages with open_page."""
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="posbench-chromium-") as profile, sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            profile,
            executable_path=chromium_path(),
            args=CHROMIUM_FLAGS,
            headless=True,
            offline=True,
            viewport={"width": 1280, "height": 900},
            has_touch=True,  # a tap as a phone makes it (page.tap), beside the mouse
        )
        try:
            yield context
        finally:
            context.close()


def open_page(context, path: Path, width: int = 1280) -> tuple:
    """(page, log): `path` opened from disk at `width` CSS pixels, waited on until its charts are drawn."""
    log = PageLog()
    page = context.new_page()
    page.set_viewport_size({"width": width, "height": 900})

    def route(handle) -> None:
        url = handle.request.url
        if url.startswith(("file:", "data:", "blob:", "about:")):
            handle.continue_()
        else:
            log.network.append(url)
            handle.abort()

    page.route("**/*", route)

    def console(message) -> None:
        if message.type == "error":
            log.errors.append(message.text)
        elif message.type == "warning":
            log.warnings.append(message.text)

    page.on("console", console)
    page.on("pageerror", lambda error: log.errors.append(f"uncaught: {error}"))
    page.goto(Path(path).resolve().as_uri())
    page.wait_for_selector("body[data-ready='true']", timeout=READY_TIMEOUT_MS, state="attached")
    return page, log


SCREENSHOT_BYTES = 1_900_000  # a screenshot is committed beside its page, and a repository takes files up to 2 MB


def screenshot(path: Path, out: Path, width: int) -> None:
    """The whole page at `width` CSS pixels; where that PNG would pass SCREENSHOT_BYTES, the page's top part that
    fits (a quarter less at a time), said on stdout."""
    with browser() as context:
        page, log = open_page(context, path, width)
        if log.errors or log.network:
            raise SystemExit(f"{path}: console errors {log.errors}, network requests {log.network}")
        data = page.screenshot(full_page=True)
        full = height = page.evaluate("document.documentElement.scrollHeight")
        while len(data) > SCREENSHOT_BYTES:
            height = int(height * 0.75)
            data = page.screenshot(full_page=True, clip={"x": 0, "y": 0, "width": width, "height": height})
        if height < full:
            print(
                f"{out}: the top {height} of the page's {full} px (the whole page is over {SCREENSHOT_BYTES:,} bytes)"
            )
        out.write_bytes(data)


if __name__ == "__main__":
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    screenshot(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]))
