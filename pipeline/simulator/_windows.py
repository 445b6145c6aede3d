"""Time filters of the histories: the six-month floor, the defaults, the clamps and the refusals.

A window's ends are Unix seconds, both included. The floor is 00:00 UTC of the day
`spec.HISTORY_MONTHS` calendar months before the clock's present (the day of the month clamped to
the month's length: six months before August 31 is February 28 or 29).
"""

from __future__ import annotations

from datetime import UTC, datetime, time
from typing import Any

from pipeline.spec import HISTORY_MONTHS, TimeWindow, Wording, floor_day, months_back


def history_floor(now: float) -> int:
    """The oldest second a history with a floor still answers, at ``now``."""
    floor = floor_day(datetime.fromtimestamp(now, UTC).date())
    return int(datetime.combine(floor, time.min, UTC).timestamp())


def month_before(now: float) -> int:
    """A calendar month before ``now``, at the same time of day (a default start)."""
    moment = datetime.fromtimestamp(int(now), UTC)
    day = months_back(moment.date(), 1)
    return int(datetime.combine(day, moment.timetz()).timestamp())


def _title(name: str) -> str:
    return name[:1].upper() + name[1:]


def _refusal(what: str, window: TimeWindow, wording: Wording) -> dict[str, list[str]]:
    """The ``errors`` of a window refused for ``what`` (span, floor, future, order)."""
    start, end = window.start, window.end
    if wording == "keys":  # the convert service's documented answers
        if what == "span":
            return {
                start: ["api.validation.dateTime.maxRange"],
                end: ["api.validation.dateTime.maxRange"],
            }
        return {start if what != "future" else end: ["validation.numeric_field_length"]}
    days = (window.max_span_s or 0) // 86_400
    if wording == "v1":  # the kline's; "greater then" is its documentation's own
        messages = {
            "future": (end, f"{_title(end)} field must not be greater than the current time."),
            "order": (end, f"{_title(end)} field must be greater then {start}."),
        }
    elif wording == "engine":
        messages = {
            "span": (start, f"{_title(start)} should not be more than {days} days before {end}."),
            "floor": (start, f"{_title(start)} should not be older than {HISTORY_MONTHS} months."),
            "future": (end, f"{_title(end)} should not be greater than the current time."),
            "order": (start, f"{_title(start)} should not be greater than {end}."),
        }
    else:
        messages = {
            "span": (start, f"The period may not be longer than {days} days."),
            "floor": (start, f"The {start} may not be older than {HISTORY_MONTHS} months."),
            "future": (end, f"The {end} may not be in the future."),
            "order": (start, f"The {start} must be a date before or equal to {end}."),
        }
    field, message = messages[what]
    return {field: [message]}


def check_window(
    window: TimeWindow, wording: Wording, params: dict[str, Any], now: float
) -> dict[str, list[str]]:
    """Resolve the window's ends in ``params`` (defaults, an end clamped to now, a start clamped
    to the floor) and return the ``errors`` that refuse it, if any (none: it is answered; a start
    after the end then simply matches nothing)."""
    start: int | None = params.get(window.start)
    end: int | None = params.get(window.end)
    if start is None and window.default_start is not None:
        start = month_before(now) if window.default_start == "month" else int(now)
    if end is None and window.default_end == "now":
        end = int(now)
    if window.future_end == "reject":
        if end is not None and end > now + 1:
            return _refusal("future", window, wording)
        if start is not None and end is not None and start > end:
            return _refusal("order", window, wording)
    elif end is not None:
        end = min(end, int(now))
    floor = history_floor(now)
    if window.floor == "reject" and start is not None and start < floor:
        return _refusal("floor", window, wording)
    span = window.max_span_s
    if span is not None and start is not None and end is not None and end - start > span:
        return _refusal("span", window, wording)
    if window.floor == "clamp":
        start = max(start or 0, floor)
    params[window.start], params[window.end] = start, end
    return {}
