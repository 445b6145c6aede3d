"""The exchange's clock, as its answers tell it, and the floor of the histories it keeps.

Every answer carries a ``Date`` header: the exchange's time of the answer, to the second. The
client keeps the latest one and the moment it arrived (`ExchangeClock`), so that what a walk takes
for "now" is the exchange's own present (the latest ``Date`` plus the time since), not this
machine's: a window's end sent after the exchange's now is refused by some histories, and the
six-month floor is the exchange's to set. A client given a clock of its own takes that instead.

`history_floor` is that floor: 00:00 UTC of the day `spec.HISTORY_MONTHS` calendar months back,
the day of the month clamped to the shorter month (six months before August 31 is February 28
or 29), as docs/api.md, section 10.9, words it.
"""

from __future__ import annotations

import calendar
import email.utils
import time
from collections.abc import Callable
from datetime import UTC, datetime

from pipeline import spec


def history_floor(now: float, months: int = spec.HISTORY_MONTHS) -> int:
    """The oldest second a history with a floor still answers at ``now`` (Unix seconds)."""
    day = datetime.fromtimestamp(now, UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    year, month = divmod(day.year * 12 + day.month - 1 - months, 12)
    last = calendar.monthrange(year, month + 1)[1]
    return int(day.replace(year=year, month=month + 1, day=min(day.day, last)).timestamp())


def http_date(value: str | None) -> datetime | None:
    """An HTTP ``Date`` header as an aware UTC datetime; None when absent or not a date."""
    if not value:
        return None
    try:
        parsed = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    # A date without a zone says nothing trustworthy about which instant it is.
    return parsed.astimezone(UTC) if parsed.tzinfo is not None else None


class ExchangeClock:
    """The exchange's present: the given clock, else the latest ``Date`` seen plus the time
    since it arrived (on this machine's monotonic clock), else this machine's wall clock."""

    __slots__ = ("_at", "_given", "_header", "_moment", "_seen", "asked")

    def __init__(self, given: Callable[[], float] | None = None) -> None:
        self._given = given
        #: The exchange was asked for its time once (a ping): one that sends no ``Date`` is not
        #: asked again before each window.
        self.asked = False
        self._header: str | None = None
        self._moment: datetime | None = None
        self._seen: float | None = None
        self._at = 0.0

    @property
    def known(self) -> bool:
        """Whether it tells the exchange's time (given a clock, or an answer's ``Date`` seen)."""
        return self._given is not None or self._seen is not None

    @property
    def latest(self) -> datetime | None:
        """The time the latest answer's ``Date`` said, if one did."""
        return self._moment

    def observe(self, header: str | None) -> datetime | None:
        """Take an answer's ``Date`` header; the time it says, if it says one."""
        if header is None:
            return None
        if header != self._header:  # a new second: parsed once, and kept
            moment = http_date(header)
            if moment is None:
                return None
            self._header, self._moment, self._seen = header, moment, moment.timestamp()
        # The same second again is a later arrival of it: the time since counts from here.
        self._at = time.monotonic()
        return self._moment

    def now(self) -> float:
        """Unix seconds. From a ``Date`` it runs up to a second behind the exchange (the
        header drops the fraction): late, so a window's end taken from it is never ahead."""
        if self._given is not None:
            return self._given()
        if self._seen is not None:
            return self._seen + (time.monotonic() - self._at)
        return spec.WALL_CLOCK.now()
