"""Every failure the client raises, and how the exchange's answers map to them.

```
WhiteBITError
├── APIError                      a call failed; names the operation, its path and the attempts
│   ├── APIStatusError            the exchange answered with an error (status, code, message)
│   │   ├── ValidationError       400/422 naming bad fields; carries ``errors`` (field -> messages)
│   │   ├── NotFoundError         404: the key to reset does not exist, or the route is unknown
│   │   ├── AuthenticationError   401: unknown key or bad signature (code 10), key disabled (2)
│   │   │   └── PayloadRejectedError  400 code 9: the signed payload itself was refused
│   │   ├── PermissionDeniedError 403: the key may not do this (code 4), no B2B access (code 0)
│   │   ├── NonceRejectedError    429 with JSON, or 400 about the 5-second window   [retried]
│   │   ├── RateLimitError        429 from the gateway, not JSON                    [retried]
│   │   └── ServerError           5xx, HTML or JSON                                 [retried]
│   ├── TransportError            no complete answer: reset, dropped mid-body       [retried]
│   │   ├── TransportTimeout      no answer in time                                 [retried]
│   │   └── ConnectionRefused     nothing listens at the address   [retried, but not in a preflight]
│   └── ResponseFormatError       a 2xx answer that cannot be used as it came
│       ├── UnreadableResponseError  not JSON: cut short, empty, HTML               [retried]
│       └── ContractError         JSON that breaks the contract: an envelope, an offset or a
│                                 limit other than asked, a key listed twice [retried once, at once]
└── WalkError                     a walk cannot vouch that it fetched everything
    ├── OffsetWindowExceeded      a slice still fills the offset window after splitting
    ├── RecordsLeftOut            an answer left records out, or fell short of its total,
    │                             again when asked once more
    └── HistoryOrderError         a newest-first history broke its order, or repeats
```

Retried errors are retried only for operations that change nothing, except the two answers that
prove a request never ran (`RateLimitError`, `NonceRejectedError`): see `_retry.py`. ``retryable``
says whether waiting could help, so a caller may try again later: a `ContractError` is tried once
more at once (a proxy's or a deploy's hiccup costs one request), but the same answer again means
the exchange does not keep the contract, and no wait changes that. Record-level problems (a field
missing, null or of another JSON type) raise nothing: the records pass as received, and the
warehouse rejects each with its reason. The mapping
follows `docs/api.md`, "Error responses seen"; note that a rejected nonce answers 429, like a rate
limit.
No error text ever carries a secret, a payload or a signature: only the exchange's answer.
"""

from __future__ import annotations

import email.utils
import re
from collections.abc import Mapping
from typing import Any, ClassVar

import httpx
import orjson

from pipeline import spec
from pipeline.spec import WALL_CLOCK

from ._config import EXCERPT_CHARS

# The exchange's answer to a nonce outside the window mentions the nonce and the seconds.
_NONCE_MESSAGE = re.compile(r"\bnonce\b.*\bseconds?\b", re.IGNORECASE)


def excerpt(content: bytes | str, limit: int = EXCERPT_CHARS) -> str:
    """The start of an answer, on one line, for an error message."""
    text = content.decode("utf-8", "replace") if isinstance(content, bytes) else content
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class WhiteBITError(Exception):
    """Base of everything this client raises on purpose."""

    #: Whether trying again later could help (the exchange was unavailable, the answer cut
    #: short), as opposed to an answer or a refusal that waiting does not change.
    retryable: ClassVar[bool] = False


class APIError(WhiteBITError):
    """A call to the exchange failed; ``attempts`` counts the tries it was given."""

    def __init__(self, detail: str, *, operation: spec.Operation, attempts: int = 1) -> None:
        super().__init__(detail)
        self.detail = detail
        self.operation = operation
        self.attempts = attempts

    @property
    def endpoint(self) -> str:
        return self.operation.path

    def __str__(self) -> str:
        tries = f" (after {self.attempts} attempts)" if self.attempts > 1 else ""
        return f"{self.operation.name} {self.operation.path}: {self.detail}{tries}"


class APIStatusError(APIError):
    """The exchange answered with an error."""

    def __init__(
        self,
        detail: str,
        *,
        operation: spec.Operation,
        status_code: int,
        code: int | None = None,
        message: str | None = None,
        errors: Mapping[str, list[str]] | None = None,
        body_excerpt: str = "",
        retry_after: float | None = None,
    ) -> None:
        super().__init__(detail, operation=operation)
        self.status_code = status_code
        self.code = code
        self.message = message
        self.errors: Mapping[str, list[str]] = errors or {}
        self.body_excerpt = body_excerpt
        self.retry_after = retry_after


class ValidationError(APIStatusError):
    """A parameter was refused; ``errors`` maps each failing field to its messages."""


class NotFoundError(APIStatusError):
    """404: the sub-account key named does not exist, or the route is unknown (empty body)."""


class AuthenticationError(APIStatusError):
    """401: unknown key or bad signature (code 10), or a disabled key (code 2)."""


class PayloadRejectedError(AuthenticationError):
    """400 code 9: the signed payload was malformed or did not match the body."""


class PermissionDeniedError(APIStatusError):
    """403: the key lacks the permission, or the account lacks B2B access."""


class NonceRejectedError(APIStatusError):
    """The nonce was refused: not above the last one (429 with JSON) or outside the window."""

    retryable = True


class RateLimitError(APIStatusError):
    """The gateway's rate limit (429, not JSON); ``retry_after`` when it said how long."""

    retryable = True


class ServerError(APIStatusError):
    """5xx: the exchange or a gateway in front of it failed."""

    retryable = True


class TransportError(APIError):
    """No complete answer: the connection was refused, reset or dropped mid-body."""

    retryable = True


class TransportTimeout(TransportError):
    """No answer within the timeout."""


class ConnectionRefused(TransportError):
    """The exchange's address refused the connection: nothing listens there (yet, or again)."""


class ResponseFormatError(APIError):
    """A 2xx answer that cannot be used as it came: one of the two kinds below."""

    def __init__(
        self, *, operation: spec.Operation, field: str, reason: str, body_excerpt: str
    ) -> None:
        super().__init__(
            f"answer does not match the spec at {field}: {reason}; found {body_excerpt}",
            operation=operation,
        )
        self.field = field
        self.reason = reason
        self.body_excerpt = body_excerpt


class UnreadableResponseError(ResponseFormatError):
    """A 2xx answer whose JSON breaks off, or that is empty: cut short on the way. Another try may
    get the whole answer."""

    retryable = True


class ContractError(ResponseFormatError):
    """A 2xx answer that breaks the contract where the walk relies on it: not JSON at all (an HTML
    page), whole yet refused by the JSON parser (invalid UTF-8, nesting too deep: its byte
    offset is the ``field``), the envelope (``records`` not a list, a field of it missing), an
    offset or a limit other than asked, more records than the limit, a ticker listed twice.
    Tried once more at once, never later."""


class WalkError(WhiteBITError):
    """A walk could not fetch everything there is, and says so rather than stop short."""


class OffsetWindowExceeded(WalkError):
    """A slice still fills the offset window after splitting: only ``reachable`` rows of it
    could be fetched, and the rest cannot be reached through this API."""

    def __init__(self, history: str, slice: str, reachable: int, *, more: int = 0) -> None:
        also = f"; {more} more slice(s) likewise, see the walk's stats" if more else ""
        super().__init__(
            f"{history} slice {slice} fills the offset window: only its newest {reachable} "
            f"rows are reachable, older ones were not fetched{also}"
        )
        self.history = history
        self.slice = slice
        self.reachable = reachable


class RecordsLeftOut(WalkError):
    """An answer left records out, and did again when asked once more: a page shorter than
    asked with more records after it, or a window or slice whose records fall short of the total
    its answer states. The walk read on and yielded every other record; ``days`` are the UTC days
    the missing records lie in."""

    def __init__(self, history: str, slice: str, days: str, detail: str, *, more: int = 0) -> None:
        also = f"; {more} more answer(s) likewise, see the walk's stats" if more else ""
        super().__init__(
            f"{history} {slice}: {detail}, of {days} (UTC); every other record was read{also}"
        )
        self.history = history
        self.slice = slice
        self.days = days
        self.detail = detail

    def again(self, more: int) -> RecordsLeftOut:
        """The same, saying how many more answers fell short likewise."""
        return RecordsLeftOut(self.history, self.slice, self.days, self.detail, more=more)


class HistoryOrderError(WalkError):
    """A history answered out of its newest-first order, or the same records whatever the
    offset, so a walk cannot prove it has neither gaps nor repeats. The walk already fetched the
    pages again that a moving head could explain (`MAX_REFETCHES`), so this is the exchange's
    answer, not a moment of it: not worth a later try (``retryable`` false)."""


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """``Retry-After`` in seconds (a number or an HTTP date), if the answer carries one."""
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - WALL_CLOCK.now())


def is_error_body(doc: Any) -> bool:
    """A success status can still carry an error: an integer ``code`` or ``success: false``."""
    if not isinstance(doc, dict):
        return False
    code = doc.get("code")
    return (isinstance(code, int) and not isinstance(code, bool)) or doc.get("success") is False


def error_for_answer(
    operation: spec.Operation,
    status: int,
    headers: Mapping[str, str],
    content: bytes,
    params: Mapping[str, Any] | None = None,
) -> APIStatusError:
    """The error an answer means (docs/api.md, "Error responses seen"); a refused parameter
    named with the value ``params`` sent for it (the exchange names the field only)."""
    try:
        doc, is_json = orjson.loads(content), True
    except orjson.JSONDecodeError:
        doc, is_json = None, False
    fields: dict[str, Any] = doc if isinstance(doc, dict) else {}
    raw_code = fields.get("code")
    code = raw_code if isinstance(raw_code, int) and not isinstance(raw_code, bool) else None
    raw_message = fields.get("message")
    message = raw_message if isinstance(raw_message, str) else None
    raw_errors = fields.get("errors")
    errors = raw_errors if isinstance(raw_errors, dict) else None
    wrapped = fields.get("success") is False and isinstance(raw_message, dict)
    if wrapped:  # the public v1 API's refusal (the kline): HTTP 200, its messages by field
        errors = raw_message
    kind = _classify(status, is_json=is_json, code=code, message=message, errors=errors)
    quoted = excerpt(content)
    said = message or ("success false" if wrapped else quoted) or "(empty body)"
    detail = f"HTTP {status}" + (f" code {code}" if code is not None else "") + f": {said}"
    if kind is ValidationError and errors:
        detail += f" {dict(errors)}"
        asked = params or {}
        # A public request's parameters are all named (nothing in them is secret, and a refused
        # window names one end for both); a private one's, those refused.
        named = asked if not operation.private else [f for f in errors if f in asked]
        sent = [f"{field}={asked[field]!r}" for field in named]
        detail += f" (sent {', '.join(sent)})" if sent else ""
    return kind(
        detail,
        operation=operation,
        status_code=status,
        code=code,
        message=message,
        errors=errors,
        body_excerpt=quoted,
        retry_after=_retry_after(headers),
    )


def _classify(
    status: int,
    *,
    is_json: bool,
    code: int | None,
    message: str | None,
    errors: Mapping[str, Any] | None,
) -> type[APIStatusError]:
    if status == 429:
        # The gateway's limit is HTML; a JSON 429 is the exchange refusing a nonce.
        return NonceRejectedError if is_json else RateLimitError
    if message is not None and _NONCE_MESSAGE.search(message):
        return NonceRejectedError
    if status >= 500:
        return ServerError
    if status == 401 or code in (2, 10):
        return AuthenticationError
    if status == 403 or code == 4:
        return PermissionDeniedError
    if status == 404:
        return NotFoundError
    if code == 9:
        return PayloadRejectedError
    if errors is not None or status == 422 or (message or "").startswith("Validation failed"):
        return ValidationError
    return APIStatusError


def transport_error(
    operation: spec.Operation, exc: httpx.TransportError, origin: str
) -> TransportError:
    # httpx-aiohttp reports a refused connection as ConnectTimeout: trust the cause, not the name.
    reason: BaseException | None = exc
    while reason is not None and not isinstance(reason, ConnectionRefusedError):
        reason = reason.__cause__ or reason.__context__
    if reason is not None:
        return ConnectionRefused(
            f"{origin} refused the connection: is the exchange's address right, and is it up?",
            operation=operation,
        )
    cause = exc.__cause__
    timed_out = isinstance(exc, httpx.TimeoutException) and (
        cause is None or isinstance(cause, TimeoutError)
    )
    kind = TransportTimeout if timed_out else TransportError
    what = "no answer in time" if timed_out else "no complete answer"
    return kind(f"{what} ({type(exc).__name__}: {exc})", operation=operation)
