"""Credentials, nonces and request signing, as `docs/api.md` describes them (section 10).

A private request's body is one compact JSON object: the parameters plus ``request`` (the path)
and ``nonce``. ``X-TXC-PAYLOAD`` is its Base64, ``X-TXC-SIGNATURE`` the hex HMAC-SHA512 of that
Base64 text keyed with the secret. Nothing here ever puts the secret into text.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from ._config import NONCE_MAX_LEAD_MS

#: Headers whose values must never be logged as they are.
REDACTED_HEADERS: Final = frozenset({"x-txc-payload", "x-txc-signature"})


def masked(api_key: str) -> str:
    """A public key shortened to its first characters: enough to tell keys apart in a log."""
    return api_key[:4] + "…" if len(api_key) > 4 else "…"


@dataclass(frozen=True, slots=True)
class Credentials:
    """An API key and its secret. Neither ``repr`` nor ``str`` shows the secret."""

    api_key: str
    api_secret: str = field(repr=False)

    def __repr__(self) -> str:
        return f"Credentials(api_key={masked(self.api_key)!r})"

    __str__ = __repr__


class NonceSource:
    """Millisecond nonces for one API key, strictly increasing within the process.

    ``max(last + 1, now_ms)``: unique under any concurrency. A key asked for more than one nonce
    per millisecond runs ahead of the clock; `take` then says how long to wait so that a nonce
    is never sent more than `NONCE_MAX_LEAD_MS` ahead of the wall clock.
    """

    def __init__(self, clock_ns: Callable[[], int] = time.time_ns) -> None:
        self._lock = threading.Lock()
        self._clock_ns = clock_ns
        self._last = 0

    def take(self) -> tuple[int, float]:
        """The next nonce, and the seconds to wait before sending it inside the window."""
        with self._lock:
            now_ms = self._clock_ns() // 1_000_000
            nonce = self._last = max(self._last + 1, now_ms)
        return nonce, max(0.0, (nonce - now_ms - NONCE_MAX_LEAD_MS) / 1000)


_sources_lock = threading.Lock()
_sources: dict[str, NonceSource] = {}


def nonce_source(api_key: str) -> NonceSource:
    """The process's one nonce source for this key, shared by every client that uses it."""
    # Keyed by a digest so the registry never holds key material.
    digest = hashlib.sha256(api_key.encode()).hexdigest()
    with _sources_lock:
        return _sources.setdefault(digest, NonceSource())


class Signer:
    """Signs private requests with one key's secret (the secret lives only in the HMAC state)."""

    __slots__ = ("_api_key", "_mac", "_window")

    def __init__(self, credentials: Credentials, *, nonce_window: bool) -> None:
        self._api_key = credentials.api_key
        # The keyed HMAC state is copied per request: cheaper than keying it again.
        self._mac = hmac.new(credentials.api_secret.encode(), digestmod=hashlib.sha512)
        self._window = nonce_window

    def __repr__(self) -> str:
        return f"Signer(api_key={masked(self._api_key)!r}, nonce_window={self._window})"

    def sign(
        self, path: str, params: Mapping[str, Any], nonce: int
    ) -> tuple[bytes, dict[str, str]]:
        """The body and headers of one signed request."""
        body: dict[str, Any] = {"request": path, "nonce": str(nonce)}
        if self._window:
            body["nonceWindow"] = True
        body.update(params)
        raw = orjson.dumps(body)
        payload = base64.b64encode(raw)
        mac = self._mac.copy()
        mac.update(payload)
        return raw, {
            "Content-Type": "application/json",
            "X-TXC-APIKEY": self._api_key,
            "X-TXC-PAYLOAD": payload.decode(),
            "X-TXC-SIGNATURE": mac.hexdigest(),
        }


def redacted(headers: Mapping[str, str]) -> dict[str, str]:
    """Headers fit for a debug log: payload and signature hidden, the key shortened."""
    out: dict[str, str] = {}
    for name, value in headers.items():
        lower = name.lower()
        if lower in REDACTED_HEADERS:
            out[name] = "[redacted]"
        elif lower == "x-txc-apikey":
            out[name] = masked(value)
        else:
            out[name] = value
    return out
