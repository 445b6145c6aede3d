"""How the client reads a declared history (`spec.History`): a walk of its pages, as its paging
declares, or a snapshot's answer; and the exchange's present, which the walks go by.

`Histories` is that part of `AsyncWhiteBIT`, which it extends: it needs of the client only its
checked, retried `call`, its `ping`, its concurrency and its clock (`_clock.ExchangeClock`).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Literal

from pipeline import spec

from ._clock import ExchangeClock
from ._report import WalkReport
from ._retry import RetryPolicy
from ._timewindows import TimeWindowsWalk
from ._walks import NewestFirstWalk
from ._window import OffsetWindowWalk


class Histories:
    """The walks and snapshots of the account's histories, and the exchange's present."""

    max_concurrency: int
    _clock: ExchangeClock

    async def call(
        self,
        operation: spec.Operation,
        params: Mapping[str, Any],
        *,
        report: WalkReport | None = None,
        retry: RetryPolicy | None = None,
    ) -> Any:
        raise NotImplementedError  # the client's

    async def ping(self, *, preflight: bool = False) -> None:
        raise NotImplementedError  # the client's

    def walk(
        self,
        history: spec.History,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        values: Mapping[str, Sequence[str]] | None = None,
        on_window_exceeded: Literal["raise", "report"] = "raise",
    ) -> NewestFirstWalk | OffsetWindowWalk | TimeWindowsWalk:
        """Every record of a history with ``since <= time < until`` (each end open when None),
        in pages, as its paging declares; ``values`` are the account's settings by name (its
        ``markets``, ``mining_accounts``), each walk taking those its declaration names.

        A newest-first history (`NewestFirstWalk`) is walked newest first; given the values of
        its ``split_setting`` (the account's markets), each is walked on its own, concurrently,
        and merged. A history read by offset window (`OffsetWindowWalk`) gives every record of
        the range (all of a snapshot), each once, its splits taking ``values`` too. A history read
        in time windows (`TimeWindowsWalk`) is walked a window at a time, newest first; a window
        out of the offset's reach is reported as ``on_window_exceeded`` says, like an offset
        window's slice.
        """
        paging, settings = history.paging, values or {}
        first, end = _seconds(since, "since"), _seconds(until, "until")
        if isinstance(paging, spec.NewestFirst):
            return NewestFirstWalk(self, history, since=first, until=end, values=settings)
        if isinstance(paging, spec.OffsetWindow):
            return OffsetWindowWalk(
                self,
                history,
                since=first,
                until=end,
                on_window_exceeded=on_window_exceeded,
                values=settings,
            )
        if isinstance(paging, spec.TimeWindows):
            return TimeWindowsWalk(
                self, history, since=first, until=end, on_window_exceeded=on_window_exceeded
            )
        raise TypeError(f"{history.name} is not walked: it is a snapshot (see `snapshot`)")

    async def snapshot(
        self,
        history: spec.History,
        *,
        values: Mapping[str, Sequence[str]] | None = None,
        report: WalkReport | None = None,
    ) -> Any:
        """A snapshot's answer as the exchange gave it, its history's fixed parameters sent; for
        one fanned out over the values of a setting (a mining account each, from ``values``, the
        account's settings by name), each value's records by value. ``report`` (when given)
        takes the exchange's time of the first answer (``observed_at``), its retries and the
        fields the spec does not name."""
        op, fixed = history.operation, dict(history.params)
        if not isinstance(history.paging, spec.Fanout):
            return await self.call(op, fixed, report=report)
        param = history.paging.param
        fanned = list((values or {}).get(history.paging.setting, ()))
        answers = await asyncio.gather(
            *(self.call(op, {**fixed, param: value}, report=report) for value in fanned)
        )
        return {value: _listed(op, answer) for value, answer in zip(fanned, answers, strict=True)}

    async def exchange_time(self) -> float:
        """The exchange's present, in Unix seconds: the client's ``clock`` if it was given one,
        else the latest answer's ``Date`` plus the time since (a ping first, when no answer has
        come yet), else this machine's clock (an exchange that sends no ``Date``)."""
        if not self._clock.known and not self._clock.asked:
            self._clock.asked = True
            await self.ping()
        return self._clock.now()


def _seconds(moment: datetime | None, name: str) -> int | None:
    if moment is None:
        return None
    if moment.tzinfo is None:
        raise ValueError(f"{name} must be timezone-aware (UTC), not a naive datetime")
    return math.floor(moment.timestamp())


def _listed(operation: spec.Operation, answer: Any) -> Any:
    """The records of an answer that lists them under an envelope field."""
    shape = operation.answer
    return answer[shape.envelope] if isinstance(shape, spec.Listed) else answer
