"""Time windows of a history read in windows (`spec.TimeWindows`): whole UTC days, never across a
calendar month, each at most the operation's longest span, newest first (`_timewindows`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

DAY_S: Final = 86_400


@dataclass(frozen=True, slots=True)
class Window:
    """Seconds ``start`` (included) to ``end`` (excluded); sent as ``start`` and ``end - 1``."""

    start: int
    end: int

    @property
    def name(self) -> str:
        first, last = utc(self.start), utc(self.end - 1)
        return f"{first:%Y-%m-%dT%H:%M:%S}Z..{last:%Y-%m-%dT%H:%M:%S}Z"

    def halves(self) -> tuple[Window, Window]:
        """The newer half, then the older."""
        middle = self.start + (self.end - self.start) // 2
        return Window(middle, self.end), Window(self.start, middle)


def utc(seconds: int) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def _month_start(seconds: int) -> int:
    day = utc(seconds)
    return int(datetime(day.year, day.month, 1, tzinfo=UTC).timestamp())


def window_days(max_span_s: int | None) -> int | None:
    """Whole days a window may hold under this span (end minus start, both included); None:
    no limit but the month."""
    if max_span_s is None:
        return None
    if max_span_s < DAY_S - 1:
        raise ValueError(f"a span of {max_span_s} s holds no whole day")
    return (max_span_s + 1) // DAY_S


def next_window(low: int, end: int, days: int | None) -> Window:
    """The newest window of ``[low, end)``: it ends at ``end`` and starts at 00:00 UTC of a day
    (or at ``low``), never before the month of its last second, at most ``days`` days long."""
    last = end - 1
    start = _month_start(last)
    if days is not None:
        start = max(start, last - last % DAY_S - (days - 1) * DAY_S)
    return Window(max(start, low), end)


def windows(low: int, high: int, max_span_s: int | None) -> list[Window]:
    """``[low, high)`` cut into windows, newest first (`next_window`)."""
    days, out, end = window_days(max_span_s), [], high
    while end > low:
        out.append(next_window(low, end, days))
        end = out[-1].start
    return out
