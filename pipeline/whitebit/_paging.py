"""Paginators: what each page of a walk says about the next request, with no I/O of their own.

Funding history is read newest first while new entries may arrive at its head, which shifts every
offset. Pages overlap by one record (offsets step by ``limit - 1``): the last record of a page
must reappear in the next. Because entries only ever arrive at the head, everything after a record
is the same in every answer, so finding that record in the next page tells exactly which records
are new to the walk, whatever arrived meanwhile and in whatever order the pages were fetched:

- found at index ``i``: the records after it are new; those before it are repeats (or head
  arrivals) and are dropped;
- not found, and the page holds only records the walk has already passed (a full page): more than
  a page arrived at the head; move the offset on by a page. A full page of records no time
  places is judged so when it was fetched again, after the page that showed the last record:
  entries only arrive at the head, so the last record can then only lie beyond it;
- not found otherwise: the page was fetched before a shift the previous page saw (a gap); fetch
  it again.

A record the walk cannot key (a field missing, null or of another JSON type: the warehouse rejects
it) is keyed by its whole content instead, and its funding time is taken from its neighbours, so
it is passed through in its place, found again in the overlap like any other, and never dropped.

Remembering what was passed needs only the last record and the keys of the records that share its
funding time: memory bounded by the largest group of entries funded at one time (one per market
and position side), never by the length of the walk.

Investments are read in fixed slices of offsets up to the spec's maximum; `OffsetWindow` says
which offsets a slice has and whether its answers filled the window. They are told apart by id
(`investment_identities`), and a record without a usable id by its content, so it too is passed
on once.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import chain
from operator import itemgetter
from time import time as wall_clock
from typing import Any, Final, Literal, cast

import orjson

from ._config import EARLIEST_FUNDING_TIME, FUTURE_TOLERANCE_S
from ._errors import FundingOrderError
from ._types import FundingEntry

#: (market, fundingTime as sent, short side): one funding payment (hedge mode pays a long and a
#: short of one market at the same time). A record without them: ("", its JSON, False).
FundingKey = tuple[str, str, bool]


_FUNDING_TIME: Final = itemgetter("fundingTime")


_MARKET_AND_TIME: Final = itemgetter(0, 1)


def funding_keys(records: Sequence[FundingEntry]) -> list[FundingKey]:
    try:
        keys = [
            (r["market"], r["fundingTime"], r["positionAmount"].startswith("-")) for r in records
        ]
        # Only strings key a record (two nulls would make two records one): joined at C speed.
        "".join(chain.from_iterable(map(_MARKET_AND_TIME, keys)))
    except (KeyError, TypeError, AttributeError):
        return list(map(funding_key, records))
    return keys


def funding_key(record: Any) -> FundingKey:
    """One record's key; a record that lacks a usable market, time or position amount is keyed
    by its content, so that the same record in the next page is still found."""
    if type(record) is dict:
        market, time, position = (
            record.get(k) for k in ("market", "fundingTime", "positionAmount")
        )
        if type(market) is str and type(time) is str and type(position) is str:
            return market, time, position.startswith("-")
    return "", orjson.dumps(record, option=orjson.OPT_SORT_KEYS).decode(), False


def plausible_time(text: object, now: float) -> int | None:
    """A funding time the walk can order and window by: Unix seconds, digits only, between
    `EARLIEST_FUNDING_TIME` and a day after ``now``. Anything else (milliseconds, 0, the year
    5138) is not trusted for ordering or for the window: the walk passes the record through in
    its place, and the warehouse reads or rejects it with its own, stricter rules."""
    if not (type(text) is str and text.isascii() and text.isdigit() and len(text) <= 11):
        return None
    seconds = int(text)
    if seconds < EARLIEST_FUNDING_TIME or seconds > now + FUTURE_TOLERANCE_S:
        return None
    return seconds


def funding_times(records: Sequence[FundingEntry], before: int | None) -> list[int | None]:
    """Each record's funding time in seconds. A time that is not plausible (see
    `plausible_time`) is passed through by the walk (the warehouse reads or rejects it); for
    ordering it takes its neighbour's time: the record before it (``before`` for the first),
    else the record after it."""
    now = wall_clock()
    try:
        texts: list[Any] = list(map(_FUNDING_TIME, records))
        joined = "".join(texts)
    except (KeyError, TypeError):  # a record without a time as text: see plausible_time
        texts = [r.get("fundingTime") if type(r) is dict else None for r in records]
        joined = ""
    if joined and all(texts) and joined.isascii() and joined.isdigit():
        known = list(map(int, texts))  # the common case, at C speed
        if min(known) >= EARLIEST_FUNDING_TIME and max(known) <= now + FUTURE_TOLERANCE_S:
            return list(known)
    times: list[int | None] = [plausible_time(text, now) for text in texts]
    if None not in times:
        return times
    previous = before
    for i, t in enumerate(times):
        if t is None:
            times[i] = previous
        else:
            previous = t
    if times and times[0] is None:
        following: int | None = None
        for i in range(len(times) - 1, -1, -1):
            if times[i] is None:
                times[i] = following
            else:
                following = times[i]
    return times


@dataclass(frozen=True, slots=True)
class FundingStep:
    """What one page did to a funding walk."""

    action: Literal["next", "refetch", "skip"]
    #: The offset to read next ("refetch": the same one again).
    offset: int
    #: Records new to the walk, in the exchange's order, and their funding times.
    fresh: list[FundingEntry] = field(default_factory=list)
    times: list[int | None] = field(default_factory=list)
    #: Records of this page the walk had already passed.
    repeated: int = 0
    #: The page was short: the history ends in it.
    last: bool = False


class FundingCursor:
    """Where a newest-first funding walk stands: the last record it passed, and the keys of the
    records that share that record's funding time (keys, not the records themselves: a caller
    may change the records it was given)."""

    __slots__ = ("_last_key", "_last_time", "_refetching", "_tie", "_tie_keys", "page_size")

    def __init__(self, page_size: int) -> None:
        if page_size < 2:
            raise ValueError("overlapping pages need a page size of at least 2")
        self.page_size = page_size
        self._last_key: FundingKey | None = None
        self._last_time: int | None = None
        # Keys and times of the passed batches that hold the run sharing the last funding time.
        self._tie: list[tuple[list[FundingKey], Sequence[int | None]]] = []
        self._tie_keys: set[FundingKey] | None = None
        # The offset of the page last answered "refetch": fetched again, it is answered after
        # the page that showed the last record.
        self._refetching: int | None = None

    @property
    def step(self) -> int:
        """Offsets advance by one record less than a page: the overlap that shows gaps."""
        return self.page_size - 1

    @property
    def last_time(self) -> int | None:
        return self._last_time

    def _passed_keys(self) -> set[FundingKey]:
        """Keys of the passed records that share the last funding time."""
        if self._tie_keys is None:
            last = self._last_time
            self._tie_keys = {
                key
                for keys, times in self._tie
                for key, t in zip(keys, times, strict=True)
                if t == last
            }
        return self._tie_keys

    def _passed(self, record: FundingEntry, time: int | None) -> bool:
        last = self._last_time
        if time is not None and last is not None and time != last:
            return time > last
        return funding_key(record) in self._passed_keys()

    def read(self, records: list[FundingEntry], offset: int) -> FundingStep:
        """Take one page, answered for ``offset``."""
        full = len(records) >= self.page_size
        start = 0
        if self._last_key is not None:
            found = self._find(records)
            if found is None:
                placed = _placed(records)
                # Entries arrive only at the head, so a full page answered after the one that
                # showed the last record, yet without it, lies wholly before it: it was passed.
                # A page of records no time places can only be judged that way.
                refetched, self._refetching = self._refetching == offset, offset
                if full and (all(self._passed(r, t) for r, t in placed) if placed else refetched):
                    return FundingStep("skip", offset + self.page_size, repeated=len(records))
                return FundingStep("refetch", offset)
            start = found + 1
            self._check_passed(records[:found])
        self._refetching = None
        fresh = records[start:]
        times = funding_times(fresh, self._last_time)
        self._advance(fresh, times)
        return FundingStep(
            "next",
            offset + len(records) - 1 if records else offset,
            fresh=fresh,
            times=times,
            repeated=max(0, start - 1),
            last=not full,
        )

    def _find(self, records: Sequence[FundingEntry]) -> int | None:
        last = self._last_key
        for i, record in enumerate(records):
            if funding_key(record) == last:
                return i
        return None

    def _check_passed(self, before: Sequence[FundingEntry]) -> None:
        """Records ahead of the last one passed (those a time places, see `_placed`) must all be
        passed already: one that is not would be skipped, so the exchange's order is not to be
        trusted."""
        for record, time in _placed(before):
            if not self._passed(record, time):
                raise FundingOrderError(
                    f"funding entry {funding_key(record)} appears ahead of {self._last_key}, "
                    "which the walk already passed, yet the walk never saw it: the exchange's "
                    "newest-first order changed"
                )

    def _check_order(self, fresh: Sequence[FundingEntry], times: Sequence[int | None]) -> None:
        previous = self._last_time
        for record, time in zip(fresh, times, strict=True):
            if time is None:
                continue
            if previous is not None and time > previous:
                raise FundingOrderError(
                    f"funding entry {funding_key(record)} (time {time}) comes after time "
                    f"{previous}: the answer is not newest first"
                )
            previous = time

    def _advance(self, fresh: Sequence[FundingEntry], times: Sequence[int | None]) -> None:
        """Pass these records, checking that they are newest first and not above the last."""
        if not fresh:
            return
        last = self._last_time
        # Only the run that shares the oldest time can be asked about later (`_passed_keys`):
        # with every time known, that run is the batch's tail, and only its keys are kept.
        tail = 0
        if None in times:
            self._check_order(fresh, times)
        else:
            known = cast("list[int]", times)
            # Sorting a sorted list is linear, and at C speed: cheaper than a Python loop.
            if (last is not None and known[0] > last) or known != sorted(known, reverse=True):
                self._check_order(fresh, times)
            tail = bisect_left(known, -known[-1], key=_negative)
        newest, oldest = times[0], times[-1]
        if oldest is not None and (newest != oldest or (last is not None and oldest != last)):
            self._tie = []  # the run of the last funding time starts within this batch
        keys = funding_keys(fresh[tail:])
        self._tie.append((keys, times[tail:]))
        self._tie_keys = None
        self._last_key = keys[-1]
        self._last_time = oldest if oldest is not None else last


def _placed(records: Sequence[FundingEntry]) -> list[tuple[FundingEntry, int]]:
    """The records a plausible time of their own places in the order, with that time.

    Only these tell whether a page lies before or after the walk's last record (a page is a
    contiguous slice of the history, so any of them tells for all). A record without one borrows
    a neighbour's time for ordering, but which neighbour depends on where the page cuts, so it
    cannot be judged by it: it is passed or not with the records around it."""
    now = wall_clock()
    placed = []
    for record in records:
        time = plausible_time(record.get("fundingTime") if type(record) is dict else None, now)
        if time is not None:
            placed.append((record, time))
    return placed


def _negative(value: int) -> int:
    return -value


@dataclass(frozen=True, slots=True)
class OffsetWindow:
    """The offsets one investments slice can be read at: ``0, limit, ...`` up to the maximum
    offset the exchange accepts, and no further."""

    limit: int
    max_offset: int

    def offsets_from(self, start: int) -> list[int]:
        """The offsets a slice reads from ``start`` on (``start`` too), the maximum last."""
        return [*range(start, self.max_offset, self.limit), self.max_offset]

    @property
    def reachable(self) -> int:
        """Rows a slice can show at most."""
        return self.max_offset + self.limit

    def filled(self, offset: int, rows: int) -> bool:
        """The slice's last reachable page came back full: there may be rows beyond it."""
        return offset >= self.max_offset and rows >= self.limit


def investment_identities(records: list[Any]) -> list[str | bytes]:
    """What tells investments apart: the id; for a record without a string id (which the
    warehouse rejects), its content, so that it is passed on once, never dropped."""
    try:
        ids = [r["id"] for r in records]
        if set(map(type, ids)) <= {str}:
            return ids
    except (KeyError, TypeError):
        pass
    return [
        r["id"]
        if type(r) is dict and type(r.get("id")) is str
        else orjson.dumps(r, option=orjson.OPT_SORT_KEYS)
        for r in records
    ]


def plan_tickers(records: list[Any]) -> set[str]:
    """The tickers of the records' plans, where they are strings (others are rejects)."""
    try:
        tickers = {r["plan"]["ticker"] for r in records}
    except (KeyError, TypeError):  # a plan or a ticker missing, or a ticker that is a list
        plans = [r.get("plan") for r in records if type(r) is dict]
        tickers = {
            p.get("ticker") for p in plans if type(p) is dict and type(p.get("ticker")) is str
        }
    return {t for t in tickers if type(t) is str}
