"""A reference implementation of the published signing scheme, written from docs/api.md alone.

Tests sign with it to check the simulator independently of our client, in every variant that
widely used clients send: key order, nonce as string or integer, ``nonceWindow`` or not.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import json
import time
from typing import Any, Literal

import httpx

from pipeline.simulator import Credentials

_counter = itertools.count()


def fresh_nonce() -> int:
    """Milliseconds, strictly increasing within the test process."""
    fresh_nonce.last = max(getattr(fresh_nonce, "last", 0) + 1, time.time_ns() // 1_000_000)  # type: ignore[attr-defined]
    return fresh_nonce.last  # type: ignore[attr-defined]


def sign(
    path: str,
    params: dict[str, Any],
    creds: Credentials,
    *,
    nonce: int | str | None = None,
    window: bool | None = None,
    order: Literal["request-first", "params-first"] = "request-first",
    nonce_as: type = str,
) -> tuple[bytes, dict[str, str]]:
    """The body and headers of a signed request."""
    n = fresh_nonce() if nonce is None else nonce
    signing: dict[str, Any] = {"request": path, "nonce": nonce_as(n)}
    if window is not None:
        signing["nonceWindow"] = window
    body = {**signing, **params} if order == "request-first" else {**params, **signing}
    raw = json.dumps(body, separators=(",", ":")).encode()
    payload = base64.b64encode(raw).decode()
    signature = hmac.new(creds.api_secret.encode(), payload.encode(), hashlib.sha512).hexdigest()
    headers = {
        "Content-Type": "application/json",
        "X-TXC-APIKEY": creds.api_key,
        "X-TXC-PAYLOAD": payload,
        "X-TXC-SIGNATURE": signature,
    }
    return raw, headers


def post(
    base_url: str, path: str, params: dict[str, Any], creds: Credentials, **kw: Any
) -> httpx.Response:
    raw, headers = sign(path, params, creds, **kw)
    return httpx.post(base_url + path, content=raw, headers=headers, timeout=10)
