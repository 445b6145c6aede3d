"""Request pacing to the exchange's rate budgets, shared by every request of the process.

The exchange counts requests per budget group in any sliding 10-second span, per API key and per
client address, and refuses (never queues) what is over. A pacer lets a small burst through, then
a steady rate a little under the budget, so that the burst plus the rate times the period stays
below the budget whatever span the exchange looks at: it never causes a 429 itself.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Iterable

from aiolimiter import AsyncLimiter

from pipeline import spec

from ._config import PACING_BURST, PACING_HEADROOM


class Pacer:
    """Paces requests to each budget group of `spec` (or the budgets given instead).

    All clients that share a pacer share its budgets: by default every client of the process
    that talks to the same exchange address shares one (`Pacer.shared`).
    """

    def __init__(
        self,
        budgets: Iterable[spec.RateBudget] = (),
        *,
        headroom: float = PACING_HEADROOM,
        burst: int = PACING_BURST,
    ) -> None:
        if not 0 < headroom <= 1:
            raise ValueError(f"pacing headroom must be within (0, 1], not {headroom}")
        if burst < 1:
            raise ValueError(f"pacing burst must be at least 1, not {burst}")
        self._budgets = {op.budget.group: op.budget for op in spec.OPERATIONS}
        self._budgets.update({b.group: b for b in budgets})
        self.headroom = headroom
        self.burst = burst
        self._limiters: dict[str, AsyncLimiter] = {}

    def budget(self, operation: spec.Operation) -> spec.RateBudget:
        """The budget this pacer holds the operation to."""
        return self._budgets[operation.budget.group]

    def burst_of(self, operation: spec.Operation) -> int:
        """The burst, smaller for a small budget: at most half of what the headroom leaves."""
        spare = self.budget(operation).requests * (1 - self.headroom) / 2
        return max(1, min(self.burst, int(spare)))

    def rate(self, operation: spec.Operation) -> float:
        """Requests per second once the burst is spent: the headroom's share of what the burst
        leaves, so that burst + rate * period stays under the budget with room for requests
        that arrive later than they left."""
        budget = self.budget(operation)
        return self.headroom * max(budget.requests - self.burst_of(operation), 1) / budget.period_s

    async def acquire(self, operation: spec.Operation) -> None:
        """Wait until the operation's budget group allows one more request."""
        group = operation.budget.group
        limiter = self._limiters.get(group)
        if limiter is None:
            # aiolimiter's leaky bucket: capacity of the burst, drained at the paced rate.
            burst = self.burst_of(operation)
            limiter = AsyncLimiter(burst, burst / self.rate(operation))
            self._limiters[group] = limiter
        await limiter.acquire()

    def __repr__(self) -> str:
        return (
            f"Pacer(headroom={self.headroom}, burst={self.burst}, groups={sorted(self._budgets)})"
        )

    @classmethod
    def shared(cls, origin: str) -> Pacer:
        """The process's pacer for one exchange address, with the spec's budgets.

        One per event loop: asyncio primitives cannot be shared across loops, and a process
        normally runs one.
        """
        per_origin = _SHARED.setdefault(asyncio.get_running_loop(), {})
        pacer = per_origin.get(origin)
        if pacer is None:
            pacer = per_origin[origin] = cls()
        return pacer


_SHARED: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, Pacer]] = (
    weakref.WeakKeyDictionary()
)
