"""How values are shown to people (the terminal's tables, the report's): decimals with their exact
digits (trailing zeros of the fixed scale trimmed, never in exponent form, never through a float);
times in UTC, ISO 8601."""

from __future__ import annotations

import json
from datetime import date, datetime
from decimal import Decimal


def decimal_text(value: Decimal) -> str:
    text = format(value, "f")  # never exponent form
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def text(value: object) -> str:
    """A cell's text; nothing for a missing value."""
    if value is None:
        return ""
    if isinstance(value, Decimal):
        return decimal_text(value)
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, list):
        return json.dumps([json_value(v) for v in value], ensure_ascii=False)
    return str(value)


def glance(value: object) -> str:
    """A figure read at a glance (a headline): a decimal rounded, with thousands separated, to
    cents from one on and to 8 places below; anything else as `text` shows it."""
    if not isinstance(value, Decimal):
        return text(value)
    places = 2 if abs(value) >= 1 else 8
    rounded = format(value, f",.{places}f")
    if places > 2:
        rounded = rounded.rstrip("0").rstrip(".")
    return "0" if rounded in ("-0", "0", "-0.00", "0.00") else rounded


def json_value(value: object) -> object:
    """JSON-safe value; a decimal becomes a string so that no reader parses it as a float."""
    if isinstance(value, Decimal):
        return decimal_text(value)
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, list):
        return [json_value(v) for v in value]
    return value
