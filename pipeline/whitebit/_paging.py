"""Paginators: what each page of a walk says about the next request, with no I/O of their own.

A history listed newest first (the funding history) is read while new entries may arrive at its
head, which shifts every offset. Pages overlap by one record (offsets step by ``limit - 1``): the
last record of a page must reappear in the next. Because entries only ever arrive at the head,
everything after a record is the same in every answer, so finding that record in the next page
tells exactly which records are new to the walk, whatever arrived meanwhile and in whatever order
the pages were fetched:

- found at index ``i``: the records after it are new; those before it are repeats (or head
  arrivals) and are dropped;
- not found, and the page holds only records the walk has already passed (a full page): more than
  a page arrived at the head; move the offset on by a page. A full page of records no time
  places is judged so when it was fetched again, after the page that showed the last record:
  entries only arrive at the head, so the last record can then only lie beyond it;
- not found otherwise: the page was fetched before a shift the previous page saw (a gap); fetch
  it again.

A record is known by the key its declaration names (`spec.NewestFirst`: the funding history's
market, time and the sign of its position). One the walk cannot key (a field missing, null or of
another JSON type: the warehouse rejects it) is keyed by its whole content instead, and its time is
taken from its neighbours, so it is passed through in its place, found again in the overlap like
any other, and never dropped.

Remembering what was passed needs only the last record and the keys of the records that share its
time: memory bounded by the largest group of entries of one time (for funding, one per market
and position side), never by the length of the walk.

A history read in fixed slices of offsets up to the spec's maximum (`spec.OffsetWindow`: the
investments, deposits and withdrawals, sub-account transfers) has `OffsetWindow` say which offsets
a slice has (up to the largest offset, and no page past the operation's ``max_reach``) and whether
its answers filled the window. Its records are told apart by their identity field (`identities`),
and a record without a usable one by its content, so it too is passed on once; their times, where
the history declares one, are read by `record_time` (integers or digit strings) and, where
unreadable, taken from their neighbours (`borrowed_times`).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import chain
from operator import itemgetter
from typing import Any, Literal, cast

import orjson

from pipeline import spec

from ._config import EARLIEST_TIME, FUTURE_TOLERANCE_S
from ._errors import HistoryOrderError

#: What a newest-first record is known by: its key fields' values (and, with a side, whether it
#: is short). A record without them: ("", its JSON).
RecordKey = tuple[object, ...]


def _content_key(record: Any) -> RecordKey:
    return "", orjson.dumps(record, option=orjson.OPT_SORT_KEYS).decode()


class RecordKeys:
    """Keys and times of a newest-first history's records, as its `spec.NewestFirst` names them."""

    __slots__ = ("_fields", "_n", "_side", "_texts", "_time", "_values", "time_field")

    def __init__(self, paging: spec.NewestFirst) -> None:
        self._fields = paging.key
        self._n = len(paging.key)
        self._side = paging.side
        self.time_field = paging.time
        self._time = itemgetter(paging.time)
        getter = itemgetter(*paging.key)
        self._values: Callable[[Any], tuple[Any, ...]] = (
            getter if self._n > 1 else (lambda record: (getter(record),))
        )
        self._texts = itemgetter(*range(self._n)) if self._n > 1 else (lambda key: (key[0],))

    def keys(self, records: Sequence[Any]) -> list[RecordKey]:
        values, side = self._values, self._side
        try:
            if side is None:
                keys: list[RecordKey] = list(map(values, records))
            else:
                keys = [(*values(r), r[side].startswith("-")) for r in records]
            # Only strings key a record (two nulls would make two records one): joined at C speed.
            "".join(chain.from_iterable(map(self._texts, keys)))
        except (KeyError, TypeError, AttributeError):
            return list(map(self.key, records))
        return keys

    def key(self, record: Any) -> RecordKey:
        """One record's key; a record that lacks a usable key field is keyed by its content, so
        that the same record in the next page is still found."""
        if type(record) is dict:
            values = [record.get(k) for k in self._fields]
            if all(type(v) is str for v in values):
                if self._side is None:
                    return tuple(values)
                position = record.get(self._side)
                if type(position) is str:
                    return (*values, position.startswith("-"))
        return _content_key(record)

    def time_of(self, record: Any, now: float) -> int | None:
        return plausible_time(record.get(self.time_field) if type(record) is dict else None, now)

    def times(self, records: Sequence[Any], before: int | None) -> list[int | None]:
        """Each record's time in seconds. A time that is not plausible (see `plausible_time`)
        is passed through by the walk (the warehouse reads or rejects it); for ordering it takes
        its neighbour's time: the record before it (``before`` for the first), else the record
        after it."""
        now = spec.WALL_CLOCK.now()
        try:
            texts: list[Any] = list(map(self._time, records))
            joined = "".join(texts)
        except (KeyError, TypeError):  # a record without a time as text: see plausible_time
            texts = [r.get(self.time_field) if type(r) is dict else None for r in records]
            joined = ""
        if joined and all(texts) and joined.isascii() and joined.isdigit():
            known = list(map(int, texts))  # the common case, at C speed
            if min(known) >= EARLIEST_TIME and max(known) <= now + FUTURE_TOLERANCE_S:
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


def plausible_time(text: object, now: float) -> int | None:
    """A time the walk can order and window by: Unix seconds, digits only, between
    `EARLIEST_TIME` and a day after ``now``. Anything else (milliseconds, 0, the year 5138) is not
    trusted for ordering or for the window: the walk passes the record through in its place, and
    the warehouse reads or rejects it with its own, stricter rules."""
    if not (type(text) is str and text.isascii() and text.isdigit() and len(text) <= 11):
        return None
    seconds = int(text)
    if seconds < EARLIEST_TIME or seconds > now + FUTURE_TOLERANCE_S:
        return None
    return seconds


@dataclass(frozen=True, slots=True)
class Step:
    """What one page did to a newest-first walk."""

    action: Literal["next", "refetch", "skip"]
    #: The offset to read next ("refetch": the same one again).
    offset: int
    #: Records new to the walk, in the exchange's order, and their times.
    fresh: list[Any] = field(default_factory=list)
    times: list[int | None] = field(default_factory=list)
    #: Records of this page the walk had already passed.
    repeated: int = 0
    #: The page was short: the history ends in it.
    last: bool = False


class NewestFirstCursor:
    """Where a newest-first walk stands: the last record it passed, and the keys of the records
    that share that record's time (keys, not the records themselves: a caller may change the
    records it was given)."""

    __slots__ = (
        "_keys", "_last_key", "_last_time", "_refetching", "_tie", "_tie_keys", "page_size",
    )  # fmt: skip

    def __init__(self, page_size: int, keys: RecordKeys) -> None:
        if page_size < 2:
            raise ValueError("overlapping pages need a page size of at least 2")
        self.page_size = page_size
        self._keys = keys
        self._last_key: RecordKey | None = None
        self._last_time: int | None = None
        # Keys and times of the passed batches that hold the run sharing the last time.
        self._tie: list[tuple[list[RecordKey], Sequence[int | None]]] = []
        self._tie_keys: set[RecordKey] | None = None
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

    def _passed_keys(self) -> set[RecordKey]:
        """Keys of the passed records that share the last time."""
        if self._tie_keys is None:
            last = self._last_time
            self._tie_keys = {
                key
                for keys, times in self._tie
                for key, t in zip(keys, times, strict=True)
                if t == last
            }
        return self._tie_keys

    def _passed(self, record: Any, time: int | None) -> bool:
        last = self._last_time
        if time is not None and last is not None and time != last:
            return time > last
        return self._keys.key(record) in self._passed_keys()

    def read(self, records: list[Any], offset: int) -> Step:
        """Take one page, answered for ``offset``."""
        full = len(records) >= self.page_size
        start = 0
        if self._last_key is not None:
            found = self._find(records)
            if found is None:
                placed = self._placed(records)
                # Entries arrive only at the head, so a full page answered after the one that
                # showed the last record, yet without it, lies wholly before it: it was passed.
                # A page of records no time places can only be judged that way.
                refetched, self._refetching = self._refetching == offset, offset
                if full and (all(self._passed(r, t) for r, t in placed) if placed else refetched):
                    return Step("skip", offset + self.page_size, repeated=len(records))
                return Step("refetch", offset)
            start = found + 1
            self._check_passed(records[:found])
        self._refetching = None
        fresh = records[start:]
        times = self._keys.times(fresh, self._last_time)
        self._advance(fresh, times)
        return Step(
            "next",
            offset + len(records) - 1 if records else offset,
            fresh=fresh,
            times=times,
            repeated=max(0, start - 1),
            last=not full,
        )

    def _find(self, records: Sequence[Any]) -> int | None:
        last = self._last_key
        for i, record in enumerate(records):
            if self._keys.key(record) == last:
                return i
        return None

    def _check_passed(self, before: Sequence[Any]) -> None:
        """Records ahead of the last one passed (those a time places, see `_placed`) must all be
        passed already: one that is not would be skipped, so the exchange's order is not to be
        trusted."""
        for record, time in self._placed(before):
            if not self._passed(record, time):
                raise HistoryOrderError(
                    f"record {self._keys.key(record)} appears ahead of {self._last_key}, "
                    "which the walk already passed, yet the walk never saw it: the exchange's "
                    "newest-first order changed"
                )

    def _check_order(self, fresh: Sequence[Any], times: Sequence[int | None]) -> None:
        previous = self._last_time
        for record, time in zip(fresh, times, strict=True):
            if time is None:
                continue
            if previous is not None and time > previous:
                raise HistoryOrderError(
                    f"record {self._keys.key(record)} (time {time}) comes after time "
                    f"{previous}: the answer is not newest first"
                )
            previous = time

    def _advance(self, fresh: Sequence[Any], times: Sequence[int | None]) -> None:
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
            self._tie = []  # the run of the last time starts within this batch
        keys = self._keys.keys(fresh[tail:])
        self._tie.append((keys, times[tail:]))
        self._tie_keys = None
        self._last_key = keys[-1]
        self._last_time = oldest if oldest is not None else last

    def _placed(self, records: Sequence[Any]) -> list[tuple[Any, int]]:
        """The records a plausible time of their own places in the order, with that time.

        Only these tell whether a page lies before or after the walk's last record (a page is a
        contiguous slice of the history, so any of them tells for all). A record without one
        borrows a neighbour's time for ordering, but which neighbour depends on where the page
        cuts, so it cannot be judged by it: it is passed or not with the records around it."""
        now = spec.WALL_CLOCK.now()
        placed = []
        for record in records:
            time = self._keys.time_of(record, now)
            if time is not None:
                placed.append((record, time))
        return placed


def _negative(value: int) -> int:
    return -value


@dataclass(frozen=True, slots=True)
class OffsetWindow:
    """The offsets one slice can be read at: ``0, limit, ...`` up to the maximum
    offset the exchange accepts, and no further."""

    limit: int
    max_offset: int

    @classmethod
    def of(cls, operation: spec.Operation, limit: int | None = None) -> OffsetWindow:
        """The operation's window for pages of ``limit`` (its largest, by default): offsets up to
        its ``offset`` maximum, and none whose page would pass its ``max_reach`` (``offset +
        limit``), which the exchange refuses."""
        size = operation.bound("limit") if limit is None else limit
        last = operation.bound("offset")
        if operation.max_reach is not None:
            last = min(last, operation.max_reach - size)
        return cls(size, max(0, last))

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


def identities(records: list[Any], field: str, alias: str = "") -> list[str | bytes]:
    """What tells a history's records apart: their identity field, under its name or its
    ``alias`` (`spec.Field.alias`); for a record without a string one, or with two spellings of
    it that differ (the warehouse rejects either), its content, so that it is passed on once,
    never dropped."""
    try:
        ids = [r[field] for r in records]
        if set(map(type, ids)) <= {str}:
            return ids
    except (KeyError, TypeError):
        pass
    return [_identity(r, field, alias) for r in records]


def _identity(record: Any, field: str, alias: str) -> str | bytes:
    if type(record) is dict:
        named = [record[name] for name in (field, alias) if name and name in record]
        if named and type(named[0]) is str and all(value == named[0] for value in named):
            return str(named[0])
    return orjson.dumps(record, option=orjson.OPT_SORT_KEYS)


def seen_values(records: list[Any], path: tuple[str, ...]) -> set[str]:
    """The text values at ``path`` in the records (an investment's ``plan.ticker``), where they
    are strings (others are rejects)."""
    found: set[str] = set()
    for record in records:
        value: Any = record
        for name in path:
            value = value.get(name) if type(value) is dict else None
        if type(value) is str:
            found.add(value)
    return found


def record_time(value: object, now: float) -> int | None:
    """A record's time the walk can order and bound by: Unix seconds as an integer (a deposit's
    ``createdAt``) or as digits (see `plausible_time`), within the same plausible years; None
    for anything else, which the warehouse reads or rejects by its own rules."""
    if type(value) is int:
        return value if EARLIEST_TIME <= value <= now + FUTURE_TOLERANCE_S else None
    return plausible_time(value, now)


def record_times(records: list[Any], name: str) -> list[int | None]:
    """Each record's own time at ``name``, None where unreadable (see `record_time`)."""
    now = spec.WALL_CLOCK.now()
    return [record_time(r.get(name) if type(r) is dict else None, now) for r in records]


def within(t: int | None, since: int | None, until: int | None) -> bool:
    """In the range ``since <= t < until``; a time no record of the page gives is kept."""
    return t is None or ((since is None or t >= since) and (until is None or t < until))


def borrowed_times(times: list[int | None], before: int | None) -> list[int | None]:
    """Each record's time, an unreadable one (None) taking its neighbour's: the record before
    it (``before`` for the first), else the record after it; so a record the walk cannot place
    keeps its place among the others. None where no record of the list has a time."""
    if None not in times:
        return times
    out = list(times)
    previous = before
    for i, t in enumerate(out):
        if t is None:
            out[i] = previous
        else:
            previous = t
    following: int | None = None
    for i in range(len(out) - 1, -1, -1):
        if out[i] is None:
            out[i] = following
        else:
            following = out[i]
    return out
