"""Headless Chromium for the browser tests and the screenshot command.

Playwright cannot download its own browser build here, so it drives the
Debian package (``apt-get install chromium``, which scripts/test does as root).
"""

from __future__ import annotations

import os
import shutil

#: Where Debian puts Chromium; ``CHROMIUM=/path/to/chrome`` points elsewhere.
DEFAULT_PATH = "/usr/bin/chromium"

ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def problem() -> str | None:
    """Why Chromium cannot be launched (and how to fix it), or None."""
    path = os.environ.get("CHROMIUM", DEFAULT_PATH)
    if shutil.which(path) is None:
        return (
            f"Chromium was not found at {path!r}, so the browser tests cannot run. "
            "scripts/test installs it when run as root (apt-get install chromium); "
            "otherwise install it yourself or set CHROMIUM=/path/to/chromium."
        )
    return None


def executable() -> str:
    """The Chromium binary to launch; RuntimeError saying how to get one."""
    if message := problem():
        raise RuntimeError(message)
    return str(shutil.which(os.environ.get("CHROMIUM", DEFAULT_PATH)))
