"""The walk of a history read in slices of its offset window (`spec.OffsetWindow`: investments,
deposits and withdrawals, the sub-account list, sub-account transfers), split by its declared
filters wherever a slice fills the window."""

from __future__ import annotations

import math
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pipeline import spec

from ._errors import OffsetWindowExceeded, ValidationError
from ._paging import OffsetWindow, borrowed_times, record_times, seen_values, within
from ._proof import Tally, in_range, short_by, short_of_total, tell_short, utc_days
from ._sightings import Key, Sightings
from ._stats import WalkStats
from ._walks import Caller, Flow, Records, Walk, _Ahead, _follow_page_size, _records


@dataclass(slots=True)
class _Slice:
    """One slice: the split values that narrow it (sent with the history's own parameters), the
    owner among them, and what reading it found."""

    name: str
    params: dict[str, Any]
    owner: str | None = None
    #: Its last reachable page came back full (or its ``total`` exceeds the window), before
    #: the range's start: it may hold more than the window shows.
    filled: bool = False

    def narrowed(self, split: spec.Split, value: Any, sent: Any) -> _Slice:
        params = {**self.params, split.param: sent}
        name = ",".join(
            f"{k}={v[0] if type(v) is list and len(v) == 1 else v}" for k, v in params.items()
        )
        return _Slice(name, params, value if split.owner else self.owner)


@dataclass(slots=True)
class _Read:
    """Records of one page of a slice, new to the walk, with their keys, and their times
    (borrowed where unreadable, see `borrowed_times`) when the history has one."""

    owner: str | None
    records: list[Any]
    keys: list[Key]
    times: list[int | None] = field(default_factory=list)


class OffsetWindowWalk(Walk[Records]):
    """Every record of a history read in slices of the offset window, each once, in pages: of
    a history split by its owner (the sub-account a transfer belongs to), the records under
    their owner, ``{owner: [record, ...]}``.

    A slice is read up to the offset window: the operation's ``limit`` and ``offset`` maxima, and
    no page past its ``max_reach``. A slice that fills the window may hold more, so it is split by
    the next of the declaration's splits: a deposit's method, then its ticker, then its status.
    A split's values are its parameter's choices (a list parameter, such as ``status``, takes one
    at a time, sent as a one-item list), else the values seen in the records read so far, those
    of the operation the split names (the main balance's tickers, or the ``listed_at`` field of
    every record of a paged list such as the sub-account list, paged to its end), and any the
    caller names in ``values``. A slice that still fills the window after the last split is
    `OffsetWindowExceeded`: raised once the walk has yielded all it could
    (``on_window_exceeded="raise"``), or only listed in the stats (``"report"``). The
    history's own ``params`` (the statuses of pending records) go with every request.

    Where the first pages are: a history with a time (its records newest first by it, a range
    asked for), or with fixed parameters, is read unsplit first, and split only where that slice
    fills the window: a recent range usually ends within the first pages of the whole history,
    and fixed parameters may not combine with every split value (the pending statuses of both
    methods are refused beside one method). A snapshot without either (the investments) is read
    a slice per value of its first split, as it always was. An ``owner`` split (the sub-account
    of a transfer) is never read unsplit (the operation needs its value): each value is a slice.
    An answer with a ``total`` tells at its first page whether a slice fits the window: one that
    does not is split at once when the walk has no range's start to stop at.

    With a time (``paging.time``), ``since`` and ``until`` (Unix seconds) bound the records the
    walk yields to ``since <= time < until``: each slice reads newest first from offset 0 and
    stops at the first page that reaches records older than ``since`` (where the archive already
    holds the records), and a slice fills the window only if it ends there before passing
    ``since``. Slices are read one after the other, so the walk gathers the range's records and
    yields them newest first by time once every slice is read (an owner's records together).
    That holds the range in memory: tens of thousands of records for these histories (deposits
    and transfers), against a sort that would otherwise need a merge of every slice's stream. A
    record whose time is unreadable takes its neighbour's in its slice, so it keeps its place
    and is never dropped (the warehouse rejects it).

    Repeats across slices are dropped: a record read again, same identity and same content (two
    records under one identity with different contents both go on, and the warehouse rejects
    them), so the walk remembers every record it read: its memory grows with the records read
    (tens of thousands), not with pages. Fields are read under either name (`spec.Field.alias`).

    A record read again differing only in the fields its history declares may change while it
    is read (`spec.OffsetWindow.changing`: a deposit that settles between two slices) is kept
    once, in its latest state and the earlier's place, and the change is noted. The state read
    last is the latest: each request of a slice is sent once every answer of the slice before
    has come, and within a slice a record shows twice only when arrivals at the head moved it
    into the next page, answered after. Such a history is gathered, as a range is.

    Limitation: the API can filter only by its parameters. A value held nowhere the split looks,
    and not named by the caller, cannot be split out: its records beyond the window of a filled
    slice stay out of reach. A record whose status changes while slices of statuses are read may
    leave one before it is read there and enter another already read: the nightly rereading of
    months that hold records not final (`spec.History.unsettled`) reads it again.
    """

    def __init__(
        self,
        client: Caller,
        history: spec.History,
        *,
        since: int | None = None,
        until: int | None = None,
        values: Mapping[str, Sequence[str]] | None = None,
        on_window_exceeded: Literal["raise", "report"],
    ) -> None:
        paging = history.paging
        if not isinstance(paging, spec.OffsetWindow):
            raise TypeError(f"{history.name} is not read by offset window")
        super().__init__(history, since=since, until=until, on_window_exceeded=on_window_exceeded)
        if paging.time is None and (since is not None or until is not None):
            raise ValueError(f"{history.name} has no time to bound a walk by")
        self._client = client
        self._paging = paging
        # One for the walk: what a slice measured holds for the next (slices are read in turn).
        self._flow = Flow(client.max_concurrency)
        op = history.operation
        self.window = OffsetWindow.of(op)
        answer = op.answer
        self._under = answer.under if isinstance(answer, spec.PageEnvelope) else "records"
        self._counted = isinstance(answer, spec.PageEnvelope) and answer.total
        # The values of each split known so far: named by the caller, seen, listed.
        self._values = {s.param: set((values or {}).get(s.param, ())) for s in paging.splits}
        self._listed: set[str] = set()
        self._sightings = Sightings(history, paging)
        # Yielded once every slice is read: a range, sorted by time; a record's later state.
        self._gathers = paging.time is not None or bool(paging.changing)

    async def _run(self) -> AsyncGenerator[Records, None]:
        if not self._gathers:
            async for read in self._slices():
                self.stats.rows += len(read.records)
                yield read.records if read.owner is None else {read.owner: read.records}
        else:
            async for page in self._gathered():
                yield page

    async def _gathered(self) -> AsyncIterator[Records]:
        """Every slice's records (the range's, for a history with a time), each in its latest
        state, an owner's together: newest first by time where the history has one, else in
        the order first read."""
        gathered: dict[str | None, dict[Key, tuple[float, Any]]] = {}
        async for read in self._slices():
            kept = gathered.setdefault(read.owner, {})
            times = read.times or [None] * len(read.records)
            for key, t, record in zip(read.keys, times, read.records, strict=True):
                earlier = kept.get(key)
                if earlier is not None:
                    self.stats.notes.append(self._sightings.changed(key[0], earlier[1], record))
                kept[key] = (-t if t is not None else -math.inf, record)
        size = self.window.limit
        for owner, by_key in gathered.items():
            records = list(by_key.values())
            if self._paging.time is not None:
                # Stable: records of one time keep the order they were read in.
                records.sort(key=_first)
            self.stats.rows += len(records)
            for start in range(0, len(records), size):
                page = [r for _, r in records[start : start + size]]
                yield page if owner is None else {owner: page}

    async def _slices(self) -> AsyncIterator[_Read]:
        """Every slice's new records in the order read: the unsplit slice first where the
        history is read so (see the class), then the slices of each filled one."""
        splits, root = self._paging.splits, _Slice("all", {})
        unsplit = not splits or (
            not splits[0].owner and (self._paging.time is not None or bool(self._history.params))
        )
        if not unsplit:
            async for read in self._split(root, 0):
                yield read
            return
        async for read in self._read(root, last=not splits):
            yield read
        if not root.filled:
            return
        if not splits:
            self._out_of_reach(root)
            return
        async for read in self._split(root, 0):
            yield read

    async def _split(self, parent: _Slice, level: int) -> AsyncIterator[_Read]:
        """The slices of ``parent`` narrowed by split ``level``'s values; a filled one is split
        by the next level, or reported when there is none."""
        splits = self._paging.splits
        split = splits[level]
        last = level == len(splits) - 1
        listed = self._history.operation.param(split.param).kind is list
        filled: list[_Slice] = []
        for value in await self._split_values(split):
            part = parent.narrowed(split, value, [value] if listed else value)
            if not last and splits[level + 1].owner:
                filled.append(part)  # the next split is its owner's: never read unsplit
                continue
            try:
                async for read in self._read(part, last=last):
                    yield read
            except ValidationError as refused:
                if split.param not in refused.errors or set(refused.errors) != {split.param}:
                    raise
                self.stats.notes.append(
                    f"{split.param} {value} is refused by the exchange ({part.name}): skipped"
                )
                continue
            if part.filled:
                filled.append(part)
        for part in filled:
            if last:
                self._out_of_reach(part)
                continue
            async for read in self._split(part, level + 1):
                yield read

    def _out_of_reach(self, part: _Slice) -> None:
        self.stats.incomplete_slices.append(
            OffsetWindowExceeded(self._history.name, part.name, self.window.reachable)
        )

    async def _split_values(self, split: spec.Split) -> list[Any]:
        """A split's values: its parameter's choices (a list's: its items'), else those seen,
        named and listed."""
        rule = self._history.operation.param(split.param)
        if rule.kind is list and rule.items is not None:
            rule = rule.items
        choices = rule.choices if rule.choices is not None else rule.text_choices
        if choices is not None:
            return list(choices)
        listing = split.listed_by
        if listing is not None and listing.name not in self._listed:
            # Its own stats: the listing's unknown fields are not this history's.
            own = WalkStats(listing.name)
            self._values[split.param] |= await self._listed_values(listing, split.listed_at, own)
            self.stats.retries += own.retries
            self.stats.rate_limited += own.rate_limited
            self._listed.add(listing.name)
        return sorted(self._values[split.param])

    async def _listed_values(self, listing: spec.Operation, at: str, stats: WalkStats) -> set[str]:
        """The values a listing gives: the keys of an answer keyed by them (the main balance's
        tickers), or the ``at`` field of each of its records, a paged list read to its end."""
        answer = listing.answer
        if not isinstance(answer, spec.Page | spec.PageEnvelope):
            got = await self._client.call(listing, {}, stats=stats)
            if isinstance(answer, spec.Listed):
                got = got[answer.envelope]
            return set(got) if type(got) is dict else seen_values(got, (at,))
        under = answer.under if isinstance(answer, spec.PageEnvelope) else "records"
        window, offset, found = OffsetWindow.of(listing), 0, set()
        while True:
            params = {"limit": window.limit, "offset": offset}
            records, size = _records(await self._client.call(listing, params, stats=stats), under)
            found |= seen_values(records, (at,))
            if len(records) < size:
                return found
            if offset >= window.max_offset:
                self.stats.notes.append(
                    f"{listing.name} lists more than {window.reachable}: the rest is not split by"
                )
                return found
            offset = min(offset + size, window.max_offset)

    async def _read(self, part: _Slice, *, last: bool) -> AsyncIterator[_Read]:
        """One slice (see `_read_once`); one whose records fall short of the total its answers
        state is read once more, then reported (`RecordsLeftOut`)."""
        tally = Tally()
        for _ in range(2):
            tally.whole = False
            async for read in self._read_once(part, tally, last=last):
                yield read
            if not tally.falls_short:
                return
        where, days = f"slice {part.name}", utc_days(tally.times)
        self.stats.left_out.append(short_of_total(self._history.name, where, days, tally, "slice"))

    async def _read_once(self, part: _Slice, tally: Tally, *, last: bool) -> AsyncIterator[_Read]:
        """One slice, newest first from offset 0, as pages of records new to the walk (within
        the range, for a history with a time), to its proven end: the range's start passed, the
        total its answers state met, or nothing past a short page (``short``). Sets
        ``part.filled``; ``last``: no split is left to narrow it."""
        client, stats, sightings = self._client, self.stats, self._sightings
        op, paging = self._history.operation, self._paging
        since, until, name = self.since, self.until, paging.time
        base = {**self._history.params, **part.params}
        stats.slices.append(part.name)

        async def fetch(offset: int, limit: int = 0) -> tuple[list[Any], int, int | None]:
            params = {**base, "limit": limit or self.window.limit, "offset": offset}
            page = await client.call(op, params, stats=stats)
            stats.pages += 1
            records, size = _records(page, self._under)
            return records, size, page.get("total") if self._counted else None

        passed = False
        previous: int | None = None  # the time of the slice's last record read

        def take(records: list[Any]) -> _Read | None:
            """The records of a page new to the walk (and within the range)."""
            nonlocal passed, previous
            found = sightings.identities(records)
            tally.seen.update(found)
            keys = sightings.new(records, found)
            new = list(keys)  # where the records new to the walk are
            for split in paging.splits:
                if split.seen:
                    self._values[split.param] |= seen_values(records, split.seen)
            stats.duplicates_dropped += len(records) - len(new)
            times: list[int | None] = []
            if name is not None and records:
                own = record_times(records, name)
                known = [t for t in own if t is not None]
                tally.times += known[:1] + known[-1:]
                passed = passed or (since is not None and bool(known) and min(known) < since)
                every = borrowed_times(own, previous)
                previous = every[-1]
                new = [n for n in new if within(every[n], since, until)]
                times = [every[n] for n in new]
            fresh = [records[n] for n in new]
            return _Read(part.owner, fresh, [keys[n] for n in new], times) if fresh else None

        async def records_at(offset: int, limit: int) -> list[Any]:
            return (await fetch(offset, limit))[0]

        async def short(offset: int, records: list[Any]) -> tuple[bool, int | None, list[_Read]]:
            """A short page at ``offset``: whether the slice ends with it (`tell_short`), the
            offset to read on from (None: a page on), and what telling it brought."""
            told = await tell_short(
                records,
                offset,
                self.window.limit,
                fetch=records_at,
                keys=sightings.identities,
                max_offset=op.bound("offset"),
                max_reach=op.max_reach,
            )
            brought = [read for answer in told.read if (read := take(answer)) is not None]
            shown = told.page + (told.probe or [])
            own = (
                [t for t in record_times(shown, name) if t is not None] if name is not None else []
            )
            if told.probe is not None and (
                not own or in_range(min(own), max(own), self.since, self.until)
            ):
                tally.short = True
                held, size = len(told.page), self.window.limit
                where, days = f"slice {part.name}", utc_days(own)
                left = short_by(self._history.name, where, days, offset, held, size, told.lost)
                stats.left_out.append(left)
            return told.ended or passed, told.after, brought

        ahead, flow = _Ahead(fetch, 1), self._flow
        offset, total = 0, None
        try:
            while True:
                ahead.request(o for o in self.window.offsets_from(offset) if _below(o, total))
                records, size, total = await ahead.take(offset)
                if size < self.window.limit:
                    # Pages asked ahead with the larger size would leave gaps: asked again.
                    await ahead.aclose()
                    _follow_page_size(stats, self.window.limit, size)
                    self.window = OffsetWindow.of(op, size)
                window = self.window
                if total is not None:
                    tally.total = total
                read = take(records)
                if read is not None:
                    flow.yielded()
                    yield read
                proven = not records or _met(total, offset, records)
                # Past the range's start too: a page that reaches it is full but at the end.
                following = offset + window.limit
                if not proven and len(records) < window.limit:
                    # Pages asked ahead lie past it: not sent while the end is proven.
                    await ahead.aclose()
                    proven, after, brought = await short(offset, records)
                    for read in brought:
                        yield read
                    following = after or following
                ended = proven or offset >= window.max_offset
                beyond = total is not None and total > window.reachable
                if passed or ended or (beyond and since is None and not last):
                    part.filled = not passed and (
                        beyond if total is not None else window.filled(offset, len(records))
                    )
                    tally.whole = proven and not passed
                    return
                offset = min(following, window.max_offset)
                ahead.max_depth = flow.depth(ahead.depth, stats.round_trip_s, ahead.waited)
                ahead.grow()
        finally:
            await ahead.aclose()


def _met(total: int | None, offset: int, records: list[Any]) -> bool:
    """A page, answered for ``offset``, meets the total its answer states."""
    return total is not None and offset + len(records) >= total


def _first(item: tuple[float, Any]) -> float:
    return item[0]


def _below(offset: int, total: int | None) -> bool:
    """An offset that may still hold records: below the slice's ``total``, when known."""
    return total is None or offset < total
