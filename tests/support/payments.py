"""The dev payment provider (dev/provider.py) run for tests, and what a test asks it."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from urllib3.util import Retry

from dev.embedded import free_port
from dev.provider import DEV_SECRET

ROOT = Path(__file__).resolve().parents[2]
#: Test cards (dev/provider_store.py's CARDS).
PAYS, DECLINED, RETRY = "4242424242424242", "4000000000000002", "4000000000000119"


class Provider:
    """``python -m dev.provider`` on a free port, its journal in ``store``."""

    def __init__(self, store: Path, *, port: int | None = None, **options: str) -> None:
        self.store, self.port = Path(store), port or free_port()
        self.options = [
            arg for name, value in options.items() for arg in (f"--{name.replace('_', '-')}", value)
        ]
        self.process: subprocess.Popen | None = None
        self.http = requests.Session()
        self.http.headers["Authorization"] = f"Bearer {DEV_SECRET}"
        # A test's calls are safe to repeat (admin switches, reads): ride out a reset.
        retry = Retry(total=3, backoff_factor=0.1, allowed_methods=None)
        self.http.mount("http://", HTTPAdapter(max_retries=retry))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def app_config(self, **more: object) -> dict[str, object]:
        """What an app needs to charge cards here."""
        return {"PAYMENT_PROVIDER_URL": self.url, "PAYMENT_PROVIDER_SECRET": DEV_SECRET, **more}

    def env(self, **more: str) -> dict[str, str]:
        return {key: str(value) for key, value in self.app_config(**more).items()}

    def start(self) -> Provider:
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "dev.provider",
                "--port",
                str(self.port),
                "--store",
                str(self.store),
                *self.options,
            ],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            assert self.process.poll() is None, "the provider exited"
            try:
                if requests.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return self
            except requests.ConnectionError:
                time.sleep(0.05)
        raise RuntimeError("the provider did not answer within 15 s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)
        self.process = None
        self.http.close()

    def __enter__(self) -> Provider:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def call(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        return self.http.request(method, self.url + path, timeout=30, **kwargs)

    def faults(self, **faults: float) -> None:
        """Set the fault switches (``slow=5``, ``fail_before_charge=-1``...); none: clear."""
        self.call("PUT", "/admin/faults", json=faults).raise_for_status()

    def charges(self, **query: str) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        params: dict[str, Any] = {"limit": 1000, **query}
        while True:
            page = self.call("GET", "/v1/charges", params=params).json()
            found += page["data"]
            if not page["has_more"]:
                return found
            params["starting_after"] = found[-1]["id"]

    def succeeded(self, reference: str | None = None) -> list[dict[str, Any]]:
        """The successful charges (of one payment reference)."""
        query = {"status": "succeeded"}
        if reference:
            query["reference"] = reference
        return self.charges(**query)

    def payment_methods(self) -> int:
        """How many payment methods (cards turned into tokens) the provider has stored."""
        return int(self.call("GET", "/admin/stats").json()["payment_methods"])

    def requests_for(self, key: str) -> int:
        """How many charge requests came with this idempotency key."""
        return int(self.call("GET", "/admin/stats").json()["per_key"].get(key, 0))
