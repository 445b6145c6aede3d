"""JSON text of received values: compact and exact (a number parsed as a `Decimal` keeps its
digits), or canonical (whatever the order of the keys), for the raw text of a reject, an array
kept whole, and telling two records apart."""

from __future__ import annotations

import json
import re
import secrets
from decimal import Decimal


def json_text(value: object, *, ascii_only: bool = False) -> str:
    """A JSON value as compact text, in the order received, every number exact (a `Decimal` as
    its digits, not as a float); ``ascii_only`` escapes every other character."""
    numbers: list[str] = []
    # A NUL (escaped in JSON text) and a fresh token: no received string can match it.
    mark = f"\x00{secrets.token_hex(8)}#"

    def exact(item: object) -> object:
        if isinstance(item, Decimal):
            numbers.append(str(item))
            return f"{mark}{len(numbers) - 1}"
        return repr(item)

    text = json.dumps(value, ensure_ascii=ascii_only, separators=(",", ":"), default=exact)
    if numbers:
        escaped = re.escape(json.dumps(mark)[1:-1])
        text = re.sub(f'"{escaped}(\\d+)"', lambda m: numbers[int(m[1])], text)
    return text


def canonical_json(value: object) -> str:
    """A JSON value's content, whatever the order of its objects' keys."""
    return json.dumps(
        value, ensure_ascii=False, separators=(",", ":"), sort_keys=True, default=repr
    )
