"""The one way the shop talks to the card payment provider: a small client over requests,
with bounded timeouts and retries.

Every call is safe to retry: reads by nature, a payment method is only a token, and a
charge carries an ``Idempotency-Key`` (the same key and body give the same charge). So
urllib3's :class:`~urllib3.util.Retry` retries any method, on a refused or dropped
connection, a read timeout, and a 5xx, a few times with a short backoff. What is still
not answered after that raises :class:`ProviderUnavailable`: whether a charge was made
is then unknown, and only the same key may find out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from urllib3.util import Retry

__all__ = [
    "CardDeclined",
    "CardRefused",
    "Charge",
    "PaymentMethod",
    "ProviderClient",
    "ProviderError",
    "ProviderUnavailable",
]


class ProviderError(Exception):
    """The provider answered something the shop cannot act on (a bug on one side)."""


class ProviderUnavailable(ProviderError):
    """No answer (timeout, connection lost) or a 5xx after the retries: not known whether
    what was asked happened."""


class CardRefused(ProviderError):
    """The card number cannot be used at all (fails the provider's check): nothing made."""


class CardDeclined(ProviderError):
    """The bank declined the charge: nothing was charged. ``charge`` is the declined
    charge's id, ``code`` the provider's reason (``generic_decline``, ...)."""

    def __init__(self, charge: str | None, code: str) -> None:
        super().__init__(code)
        self.charge, self.code = charge, code


@dataclass(frozen=True)
class PaymentMethod:
    id: str
    last4: str


@dataclass(frozen=True)
class Charge:
    id: str
    amount: int
    currency: str
    reference: str
    status: str
    #: True when the provider answered with what an earlier request of this key did.
    replayed: bool = False


class ProviderClient:
    """One per app (one connection pool, shared by threads)."""

    def __init__(
        self, url: str, secret: str, *, timeout: float = 10.0, retries: int = 2, pool: int = 10
    ) -> None:
        self.url = url.rstrip("/")
        # (connect, read) per attempt
        self.timeout = (min(3.0, timeout), timeout)
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {secret}"
        retry = Retry(
            total=retries,
            connect=retries,
            read=retries,
            status=retries,
            other=0,
            backoff_factor=0.2,
            backoff_max=2,
            status_forcelist=(500, 502, 503, 504),
            allowed_methods=None,
            raise_on_status=False,
            respect_retry_after_header=True,
        )
        adapter = HTTPAdapter(max_retries=retry, pool_connections=1, pool_maxsize=pool)
        self.session.mount("http://", adapter)
        self.session.mount("https://", adapter)

    def close(self) -> None:
        self.session.close()

    def create_payment_method(self, number: str) -> PaymentMethod:
        """Tokenize a card number: the shop keeps the token, never the number."""
        status, body = self._call("POST", "/v1/payment_methods", json={"card": {"number": number}})
        if status == 400 and _code(body) == "invalid_number":
            raise CardRefused(_code(body))
        return _payment_method(self._expect(status, body, 201))

    def payment_method(self, pm_id: str) -> PaymentMethod | None:
        status, body = self._call("GET", f"/v1/payment_methods/{pm_id}")
        if status == 404:
            return None
        return _payment_method(self._expect(status, body, 200))

    def charge(
        self,
        *,
        amount: int,
        currency: str,
        payment_method: str,
        reference: str,
        key: str,
        metadata: dict[str, str] | None = None,
    ) -> Charge:
        """Charge ``amount`` once per ``key``: a repeat of the key answers what the first
        did (the charge, or :class:`CardDeclined` again). ``metadata`` is kept on the
        charge and comes back in the provider's events about it."""
        status, body, headers = self._call_with_headers(
            "POST",
            "/v1/charges",
            headers={"Idempotency-Key": key},
            json={
                "amount": amount,
                "currency": currency,
                "payment_method": payment_method,
                "reference": reference,
                **({"metadata": metadata} if metadata else {}),
            },
        )
        # the method is unknown or unusable: it can never be charged
        if status == 400:
            raise CardRefused(_code(body))
        if status == 402:
            error = body.get("error") or {}
            raise CardDeclined(error.get("charge"), error.get("decline_code") or _code(body))
        found = self._expect(status, body, 200, 201)
        return _charge(found, replayed=headers.get("Idempotent-Replayed") == "true")

    def charges(self, *, reference: str | None = None, status: str | None = None) -> list[Charge]:
        """Every charge (of ``reference``, in ``status``), page by page."""
        found: list[Charge] = []
        params: dict[str, Any] = {"limit": 1000, "reference": reference, "status": status}
        while True:
            code, body = self._call("GET", "/v1/charges", params=params)
            page = self._expect(code, body, 200)
            found += [_charge(item) for item in page["data"]]
            if not page.get("has_more") or not page["data"]:
                return found
            params["starting_after"] = page["data"][-1]["id"]

    def _call(self, method: str, path: str, **kwargs: Any) -> tuple[int, dict[str, Any]]:
        status, body, _ = self._call_with_headers(method, path, **kwargs)
        return status, body

    def _call_with_headers(
        self, method: str, path: str, **kwargs: Any
    ) -> tuple[int, dict[str, Any], Any]:
        try:
            response = self.session.request(method, self.url + path, timeout=self.timeout, **kwargs)
        except requests.RequestException as error:
            raise ProviderUnavailable(type(error).__name__) from error
        if response.status_code >= 500:
            raise ProviderUnavailable(f"HTTP {response.status_code}")
        try:
            body = response.json()
        except ValueError as error:
            raise ProviderError(f"HTTP {response.status_code}, not JSON") from error
        return response.status_code, body, response.headers

    @staticmethod
    def _expect(status: int, body: dict[str, Any], *wanted: int) -> dict[str, Any]:
        if status not in wanted:
            raise ProviderError(f"HTTP {status}: {_code(body)}")
        return body


def _code(body: dict[str, Any]) -> str:
    return str((body.get("error") or {}).get("code") or "")


def _payment_method(body: dict[str, Any]) -> PaymentMethod:
    return PaymentMethod(body["id"], body["card"]["last4"])


def _charge(body: dict[str, Any], *, replayed: bool = False) -> Charge:
    return Charge(
        body["id"],
        body["amount"],
        body["currency"],
        body.get("reference", ""),
        body["status"],
        replayed,
    )
