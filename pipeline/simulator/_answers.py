"""Every error answer the simulated exchange gives, with the status and body the real one uses,
and what its answer switches take (a page cap, the spelling its records name a field in).

Bodies are those of `docs/api.md`, "Error responses seen"; where it names only a message, the
code is the one the same family of errors carries (9 for payload problems).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import orjson

from pipeline import spec

#: How records name the fields the documentation names two ways (`spec.Field.alias`): ``camel``
#: as clients recorded the service's answers (``transactionId``), ``openapi`` as WhiteBIT's
#: OpenAPI file writes them (``transaction_id``).
Spelling = Literal["camel", "openapi"]
SPELLINGS: tuple[Spelling, ...] = ("camel", "openapi")

#: Per operation, each field its records may name two ways, as a key of compact JSON under each
#: name: no string value holds ``"name":`` unescaped, so the bytes are renamed as they are.
_RESPELLED: dict[str, tuple[tuple[bytes, bytes], ...]] = {
    op.path: tuple(
        (b'"%b":' % name.encode(), b'"%b":' % alias.encode())
        for name, alias in spec.aliases(op.record).items()
    )
    for op in spec.OPERATIONS
}


def page_cap_of(value: Any) -> int | None:
    """A page cap (`SimulatorState.page_cap`): a number of records, or None."""
    if value is None:
        return None
    if type(value) is not int or value < 1:
        raise ValueError(f"a page cap is a number of records, at least 1, not {value!r}")
    return value


def spelling_of(value: Any) -> Spelling:
    """A spelling by its name; another name is a `ValueError`."""
    for known in SPELLINGS:
        if value == known:
            return known
    raise ValueError(f"a spelling is one of {', '.join(SPELLINGS)}, not {value!r}")


def respelled(path: str, body: bytes) -> bytes:
    """A successful answer of ``path``, every field the documentation names two ways under the
    name WhiteBIT's OpenAPI file gives it."""
    for name, alias in _RESPELLED[path]:
        body = body.replace(name, alias)
    return body


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    body: bytes
    media_type: str = "application/json"


def json_answer(status: int, body: Any) -> Answer:
    return Answer(status, orjson.dumps(body))


def private_error(status: int, code: int, message: str, errors: Any = None) -> Answer:
    body: dict[str, Any] = {"code": code, "message": message}
    if errors is not None:
        body["errors"] = errors
    return json_answer(status, body)


def public_error(status: int, message: str, params: list[Any] | None = None) -> Answer:
    return json_answer(status, {"success": False, "message": message, "params": params or []})


UNAUTHORIZED = private_error(401, 10, "Unauthorized request.")
KEY_DISABLED = private_error(401, 2, "This action is unauthorized. Enable your key in API settings")
INVALID_PAYLOAD = private_error(400, 9, "Invalid payload.")
PAYLOAD_NOT_PROVIDED = private_error(400, 9, "Payload not provided.")
NONCE_NOT_PROVIDED = private_error(400, 9, "Nonce not provided.")
REQUEST_NOT_PROVIDED = private_error(400, 9, "Request not provided.")
# A reused or non-increasing nonce looks exactly like a rate limit, but in JSON.
NONCE_TOO_LOW = private_error(429, 0, "Too many requests.", {})
NONCE_OUTSIDE_WINDOW = private_error(
    400, 0, "Your nonce is more than 5 seconds lesser than the current nonce."
)
NOT_PERMITTED = private_error(403, 4, "This API Key is not authorized to perform this action.")
NO_B2B_ACCESS = private_error(
    403,
    0,
    "You don't have permission to use this endpoint. Please contact support for more details",
)
API_KEY_NOT_FOUND = json_answer(404, {"message": "API key not found"})
NOT_FOUND = Answer(404, b"", "text/plain")

# What a gateway and a failing upstream send: not JSON, and no Retry-After.
GATEWAY_RATE_LIMITED = Answer(
    429,
    b"<html><head><title>429 Too Many Requests</title></head><body><center>"
    b"<h1>429 Too Many Requests</h1></center><hr><center>nginx</center></body></html>\n",
    "text/html",
)


def html_server_error(status: int) -> Answer:
    titles = {500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable"}
    title = f"{status} {titles[status]}".encode()
    return Answer(
        status,
        b"<html><head><title>"
        + title
        + b"</title></head><body><center><h1>"
        + title
        + b"</h1></center><hr><center>cloudflare</center></body></html>\n",
        "text/html",
    )
