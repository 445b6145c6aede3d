"""Rate budgets as the exchange's gateway enforces them: per API key and per client address.

A sliding window over the last ``period`` seconds, as strict as any reading of "N requests per
10 s": whatever 10-second span you pick, no key and no address had more than N answered. Requests
over the budget are rejected, never queued, and do not count. An operation with a budget of its
own (`spec.Operation.endpoint_budget`) spends it and its group's at once: both must have room.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Mapping

from pipeline.spec import OPERATIONS, Operation, RateBudget


class RateLimiter:
    def __init__(
        self,
        budgets: Mapping[str, RateBudget] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._lock = threading.Lock()
        self.enabled = True
        #: Seconds that only go forward, the windows' time (a test moves its own).
        self.clock = clock
        self._budgets: dict[str, RateBudget] = {op.budget.group: op.budget for op in OPERATIONS}
        self._budgets.update(
            {
                op.endpoint_budget.group: op.endpoint_budget
                for op in OPERATIONS
                if op.endpoint_budget
            }
        )
        self._budgets.update(budgets or {})
        self._windows: dict[tuple[str, str], deque[float]] = {}
        self.rejected = 0

    def set_budget(self, group: str, requests: int, period_s: float) -> None:
        """Override one budget (tests shrink them to see the limit quickly)."""
        if group not in self._budgets:
            raise KeyError(f"no rate budget named {group!r}")
        with self._lock:
            self._budgets[group] = RateBudget(group, requests, period_s)
            self._windows = {k: w for k, w in self._windows.items() if k[0] != group}

    def budget(self, group: str) -> RateBudget:
        return self._budgets[group]

    def admit(self, op: Operation, address: str, api_key: str | None) -> bool:
        """Count the request against its budgets, or refuse it when one is spent."""
        if not self.enabled:
            return True
        groups = [op.budget.group]
        if op.endpoint_budget is not None:
            groups.append(op.endpoint_budget.group)
        now = self.clock()
        scopes = [("addr:" + address)]
        if api_key:
            scopes.append("key:" + api_key)
        with self._lock:
            windows = []
            for group in groups:
                budget = self._budgets[group]
                horizon = now - budget.period_s
                for scope in scopes:
                    window = self._windows.setdefault((group, scope), deque())
                    while window and window[0] <= horizon:
                        window.popleft()
                    if len(window) >= budget.requests:
                        self.rejected += 1
                        return False
                    windows.append(window)
            for window in windows:
                window.append(now)
        return True
