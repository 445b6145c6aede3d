"""A successful answer taken in: its JSON parsed (exactly, where it holds numbers with a fraction:
`_exact`), its shape checked (`_shapes`), and what a walk relies on beyond the shape: a page is
the one asked for, a ticker is listed once. What breaks the contract is a `ContractError`; JSON
cut short is an `UnreadableResponseError`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

import orjson

from pipeline import spec

from ._config import EXCERPT_CHARS
from ._errors import (
    ContractError,
    ResponseFormatError,
    UnreadableResponseError,
    excerpt,
    is_error_body,
)
from ._exact import EXACT, NotExactJSON, loads_exact
from ._shapes import SHAPES, Unknown, _Mismatch, _quote

#: Answers keyed by ticker: small, so parsed a second time to see a key listed twice, which a
#: JSON parser otherwise resolves silently by keeping the last value.
KEYED: Final = frozenset(
    op.name for op in spec.OPERATIONS if isinstance(op.answer, spec.Keyed | spec.KeyedNumbers)
)


def _unparsed(
    operation: spec.Operation, content: bytes, exc: orjson.JSONDecodeError
) -> ResponseFormatError:
    """Why the parser refused an answer: cut short on the way (`UnreadableResponseError`,
    waited for and tried again), or whole yet not JSON the parser takes (`ContractError`: no
    network fault makes invalid UTF-8, nesting too deep or a wrong character before the end, so
    the same answer would come again)."""
    start = content.lstrip()[:1]
    if start and start not in b"{[":
        # Not JSON from its first character (an HTML page, plain text).
        return ContractError(
            operation=operation,
            field="(the whole answer)",
            reason="a success answer that is not JSON at all",
            body_excerpt=excerpt(content),
        )
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError as bad:
        at, why = bad.start, f"not valid UTF-8 ({bad.reason})"
        broke_off = bad.end == len(content) and bad.reason == "unexpected end of data"
    else:
        # The parser counts characters; the offset a reader can seek to is in bytes.
        at, why = len(text[: exc.pos].encode()), exc.msg
        broke_off = exc.pos >= len(text.rstrip())  # it ran out of input
    if broke_off:
        # JSON that breaks off was cut short, usually at its end, so quote the end.
        tail = content.decode("utf-8", "replace")[-EXCERPT_CHARS:]
        return UnreadableResponseError(
            operation=operation,
            field="(the whole answer)",
            reason=f"not valid JSON ({exc})",
            body_excerpt="the answer ending " + excerpt("…" + tail),
        )
    near = content[max(0, at - EXCERPT_CHARS // 2) : at + EXCERPT_CHARS // 2]
    return ContractError(
        operation=operation,
        field=f"byte {at} of {len(content)}",
        reason=f"a whole answer the JSON parser refuses: {why}",
        body_excerpt=f"around byte {at}: " + excerpt(near),
    )


def parse(
    operation: spec.Operation, content: bytes, unknown: Unknown, params: Mapping[str, Any]
) -> Any:
    """The answer's JSON, once its envelope keeps the contract (a page: for the request's
    ``params``); unknown fields are noted in ``unknown``. Raises `UnreadableResponseError` (not
    JSON) or `ContractError`."""
    try:
        doc = loads_exact(content) if operation.name in EXACT else orjson.loads(content)
    except orjson.JSONDecodeError as exc:
        raise _unparsed(operation, content, exc) from None
    except NotExactJSON as refused:
        raise ContractError(
            operation=operation,
            field="(the whole answer)",
            reason=f"JSON that cannot be read with its numbers exact: {refused}",
            body_excerpt=excerpt(content),
        ) from None
    shape = SHAPES[operation.name]
    try:
        if not shape.ok(doc):
            if is_error_body(doc):  # the caller reads it as the error it is
                raise _Mismatch("", "an error answer with a success status", doc)
            shape.survey(doc, "", unknown)
        if operation.name in PAGED:
            _check_page(operation, doc, params)
        elif operation.name in KEYED:
            _refuse_repeated_keys(content)
    except _Mismatch as mismatch:
        raise ContractError(
            operation=operation,
            field=mismatch.path or "(the whole answer)",
            reason=mismatch.reason,
            body_excerpt=_quote(mismatch.value),
        ) from None
    return doc


#: Answers that are pages: ``offset``, ``limit`` and their records, under ``records`` or the
#: field a `spec.PageEnvelope` names (``data``); by operation name, that field.
PAGED: Final = {
    op.name: op.answer.under if isinstance(op.answer, spec.PageEnvelope) else "records"
    for op in spec.OPERATIONS
    if isinstance(op.answer, spec.Page | spec.PageEnvelope)
}


def _check_page(operation: spec.Operation, page: Any, params: Mapping[str, Any]) -> None:
    """A page is the one asked for: a walk works out its next offset from it. Its offset is the
    one asked; its limit at most the one asked (a lower one is the exchange's own page size,
    which a walk follows); its records at most its limit."""
    offset = params.get("offset", operation.param("offset").default or 0)
    limit = params.get("limit", operation.param("limit").default)
    records = page[PAGED[operation.name]]
    said = {"offset": page["offset"], "limit": page["limit"]}
    if page["offset"] != offset:
        raise _Mismatch(
            "offset", f"asked for offset {offset}, the answer is for {page['offset']}", said
        )
    if not (1 <= page["limit"] <= (limit or page["limit"])):
        raise _Mismatch("limit", f"asked for limit {limit}, the answer says {page['limit']}", said)
    if len(records) > page["limit"]:
        raise _Mismatch(
            PAGED[operation.name],
            f"asked for at most {page['limit']} records, the answer has {len(records)}",
            said,
        )
    total = page.get("total")
    if type(total) is int and total < 0:
        # A walk reads from it how far a slice reaches (`spec.PageEnvelope` with ``total``).
        raise _Mismatch("total", f"a count of records below zero: {total}", said)


def _refuse_repeated_keys(content: bytes) -> None:
    """Raise `_Mismatch` at the first key an object of the answer lists twice: at the top, a
    ticker (which of its balances is right cannot be told); below, a field of one balance."""
    # id of an object -> the path of the key repeated in it or below it, and that key's values
    repeated: dict[int, tuple[tuple[str, ...], list[Any]]] = {}
    made: list[dict[str, Any]] = []  # every object, kept alive so that no id is reused

    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        made.append(obj := dict(pairs))
        seen: set[str] = set()
        for key, value in pairs:
            if key in seen:
                repeated[id(obj)] = ((key,), [v for k, v in pairs if k == key])
                break
            seen.add(key)
            if id(value) in repeated:
                below, values = repeated[id(value)]
                repeated[id(obj)] = ((key, *below), values)
                break
        return obj

    found = repeated.get(id(json.loads(content, object_pairs_hook=hook)))
    if found is not None:
        path, values = found
        what = "a ticker" if len(path) == 1 else "a field"
        raise _Mismatch(
            ".".join(path),
            f"{what} listed more than once, so which value is right is unknown",
            values,
        )
