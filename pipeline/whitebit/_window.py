"""The walk of a history read in slices of its offset window (`spec.OffsetWindow`: the
investments), split by its declared filters wherever a slice fills the window."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pipeline import spec

from ._errors import OffsetWindowExceeded, ValidationError
from ._paging import OffsetWindow, identities, seen_values
from ._report import WalkReport
from ._walks import Caller, _Ahead, _follow_page_size, _records


@dataclass(slots=True)
class _Slice:
    name: str
    params: dict[str, Any]
    filled: bool = False


class OffsetWindowWalk:
    """Every record of a history read in slices of the offset window, each once, in pages.

    A slice is read up to the offset window (the operation's ``limit`` and ``offset`` maxima). The
    walk reads a slice per value of the declaration's first split (an investment's status); a
    slice whose last reachable page is full may hold more, so it is split by the next (by
    ticker: the values seen in the rows read so far, those of the operation the split names
    (the main balance), and any the caller names). A slice that still fills the window after the
    last split is `OffsetWindowExceeded`: raised once the walk has yielded all it could
    (``on_window_exceeded="raise"``), or only listed in the report (``"report"``).

    Repeats across slices are dropped by identity, so the walk remembers every identity it
    yielded: its memory grows with the history's records (tens of thousands), not with pages.

    Limitation: the API can filter only by its parameters, and tells no totals. A value held
    nowhere the split looks, and not named by the caller, cannot be split out: its rows beyond the
    window of a filled slice stay out of reach.
    """

    def __init__(
        self,
        client: Caller,
        history: spec.History,
        *,
        on_window_exceeded: Literal["raise", "report"],
        values: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        paging = history.paging
        if not isinstance(paging, spec.OffsetWindow):
            raise TypeError(f"{history.name} is not read by offset window")
        if on_window_exceeded not in ("raise", "report"):
            raise ValueError(
                f"on_window_exceeded must be 'raise' or 'report', not {on_window_exceeded!r}"
            )
        self._client = client
        self._history, self._paging = history, paging
        self.on_window_exceeded = on_window_exceeded
        op = history.operation
        self.window = OffsetWindow(op.bound("limit"), op.bound("offset"))
        self.report = WalkReport(op.name)
        # The values of each split known so far: named by the caller, seen, listed.
        self._values = {s.param: set((values or {}).get(s.param, ())) for s in paging.splits}
        self._listed: set[str] = set()
        self._seen: set[str | bytes] = set()
        self._started = False

    def __aiter__(self) -> AsyncIterator[list[Any]]:
        if self._started:
            raise RuntimeError("a walk runs once; start another for a second pass")
        self._started = True
        return self._run()

    async def _run(self) -> AsyncIterator[list[Any]]:
        report, started = self.report, time.monotonic()
        try:
            async for page in self._split({}, 0):
                yield page
        finally:
            report.elapsed_s = time.monotonic() - started
        if report.incomplete_slices and self.on_window_exceeded == "raise":
            first = report.incomplete_slices[0]
            raise OffsetWindowExceeded(
                self._history.name,
                first.slice,
                first.reachable,
                more=len(report.incomplete_slices) - 1,
            )

    async def _split(self, params: dict[str, Any], level: int) -> AsyncIterator[list[Any]]:
        """The slices of ``params`` narrowed by split ``level``'s values; a filled one is split
        by the next level, or reported when there is none."""
        split = self._paging.splits[level]
        last = level == len(self._paging.splits) - 1
        filled: list[_Slice] = []
        for value in await self._split_values(split):
            part = _Slice(
                _slice_name({**params, split.param: value}), {**params, split.param: value}
            )
            try:
                async for page in self._slice(part):
                    yield page
            except ValidationError as refused:
                if split.param not in refused.errors or set(refused.errors) != {split.param}:
                    raise
                self.report.notes.append(
                    f"{split.param} {value} is unknown to the exchange: skipped"
                )
                continue
            if part.filled:
                filled.append(part)
        for part in filled:
            if last:
                self.report.incomplete_slices.append(
                    OffsetWindowExceeded(self._history.name, part.name, self.window.reachable)
                )
                continue
            async for page in self._split(part.params, level + 1):
                yield page

    async def _split_values(self, split: spec.Split) -> list[Any]:
        """A split's values: its parameter's choices, else those seen, named and listed."""
        choices = self._history.operation.param(split.param).choices
        if choices is not None:
            return list(choices)
        if split.listed_by is not None and split.listed_by.name not in self._listed:
            # Its own report: the listing's unknown fields are not this history's.
            own = WalkReport(split.listed_by.name)
            listed = await self._client.call(split.listed_by, {}, report=own)
            self.report.retries += own.retries
            self.report.rate_limited += own.rate_limited
            self._values[split.param] |= set(listed)
            self._listed.add(split.listed_by.name)
        return sorted(self._values[split.param])

    async def _slice(self, part: _Slice) -> AsyncIterator[list[Any]]:
        client, report, seen = self._client, self.report, self._seen
        op, paging = self._history.operation, self._paging
        report.slices.append(part.name)

        async def fetch(offset: int) -> tuple[list[Any], int]:
            params = {**part.params, "limit": self.window.limit, "offset": offset}
            page = await client.call(op, params, report=report)
            report.pages += 1
            return _records(page)

        ahead = _Ahead(fetch, client.max_concurrency)
        offset = 0
        try:
            while True:
                ahead.request(self.window.offsets_from(offset))
                records, size = await ahead.take(offset)
                if size < self.window.limit:
                    # Pages asked ahead with the larger size would leave gaps: asked again.
                    await ahead.aclose()
                    _follow_page_size(report, self.window.limit, size)
                    self.window = OffsetWindow(size, self.window.max_offset)
                window = self.window
                found = identities(records, paging.identity)
                fresh = [r for r, i in zip(records, found, strict=True) if i not in seen]
                seen.update(found)
                for split in paging.splits:
                    if split.seen:
                        self._values[split.param] |= seen_values(records, split.seen)
                report.duplicates_dropped += len(records) - len(fresh)
                if fresh:
                    report.rows += len(fresh)
                    yield fresh
                if len(records) < window.limit or offset >= window.max_offset:
                    part.filled = window.filled(offset, len(records))
                    return
                offset = min(offset + window.limit, window.max_offset)
                ahead.grow()
        finally:
            await ahead.aclose()


def _slice_name(params: Mapping[str, Any]) -> str:
    return ",".join(f"{name}={value}" for name, value in params.items())
