"""Every error answer the simulated exchange gives, with the status and body the real one uses.

Bodies are those of `docs/api.md`, "Error responses seen"; where it names only a message, the
code is the one the same family of errors carries (9 for payload problems).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson


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
