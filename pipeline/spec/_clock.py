"""The clock the product goes by, read in this one place: every module that needs the time is
handed a `Clock` from an edge (a command's start, the code location's load, the simulator), so a
test sets the day or the minute instead of waiting for it.

`Clock` is this machine's wall clock. `SimClock` is a clock set to a moment: standing still
there, or running on from it; a test, or the simulator's data, moves it forward. Durations and
pacing go by the monotonic clock (``time.monotonic``), which no test sets; the exchange's own
time is what its answers' ``Date`` says, not ours. A nonce and the bounds of a plausible record
time go by `WALL_CLOCK`, this machine's real time, as the exchange checks them by its own.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, date, datetime
from typing import Final


class Clock:
    """This machine's wall clock: Unix seconds, and the UTC moment and day they are."""

    def now(self) -> float:
        """Unix seconds."""
        return time.time()

    def moment(self) -> datetime:
        """Now, as an aware UTC datetime."""
        return datetime.fromtimestamp(self.now(), UTC)

    def today(self) -> date:
        """Today's UTC day."""
        return self.moment().date()


#: This machine's wall clock, for the edges that start with it.
WALL_CLOCK: Final = Clock()


class SimClock(Clock):
    """A clock set to a moment (Unix seconds, by default the wall clock's now): frozen there, or
    running on from it with the time since; moved forward by hand, never back."""

    def __init__(self, start: float | datetime | None = None, *, frozen: bool = True) -> None:
        self._lock = threading.Lock()
        if isinstance(start, datetime):
            start = start.timestamp()
        self._base = WALL_CLOCK.now() if start is None else float(start)
        self._since = time.monotonic()
        self._frozen = frozen

    @classmethod
    def running(cls) -> SimClock:
        return cls(frozen=False)

    def now(self) -> float:
        if self._frozen:
            return self._base
        return self._base + (time.monotonic() - self._since)

    def advance(self, seconds: float) -> float:
        """Move the clock forward (never back: a history only grows at its head)."""
        if seconds < 0:
            raise ValueError("a set clock only moves forward")
        with self._lock:
            self._base += seconds
        return self.now()

    def set(self, moment: datetime) -> None:
        """Move the clock forward to ``moment`` (aware)."""
        self.advance(moment.timestamp() - self.now())
