"""The simulator's data clock: frozen for reproducible tests, or running with the wall clock.

Only the data follows it (which funding times have happened). Nonce windows are checked against
the real wall clock, as the exchange checks them against its own.
"""

from __future__ import annotations

import threading
import time


class SimClock:
    """Seconds since the epoch, frozen at a moment or running; a test may move it forward."""

    def __init__(self, start: float | None = None, *, frozen: bool = True) -> None:
        self._lock = threading.Lock()
        self._base = time.time() if start is None else float(start)
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
        """Move the clock forward (never back: history only grows at its head)."""
        if seconds < 0:
            raise ValueError("the simulator's clock only moves forward")
        with self._lock:
            self._base += seconds
        return self.now()
