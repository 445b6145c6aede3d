"""How a walk proves that a window (a slice, a newest-first history) ends, with no I/O of its own
but the fetch it is given.

A page shorter than asked is not the end of what is paged: exchanges leave a record out of one
answer now and then. `tell_short` asks the offset just past a short page for as many records as
it fell short (the probe): empty, the page ends it; not, the page left records out (`left_out`
counts those the probe does not show itself), and it is asked once more. A window whose answers
state a total is compared with the records read in it (`Tally`). The UTC days of the records an
answer left out, for the message that names them, are `utc_days`.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any, Generic, TypeVar

from ._config import EARLIEST_TIME, MAX_REFETCHES
from ._errors import RecordsLeftOut

T = TypeVar("T")

#: 2100-01-01 UTC: a later record time is no day to name.
_LATEST_TIME = 4_102_444_800


@dataclass(slots=True)
class Short(Generic[T]):
    """What a page shorter than asked turned out to be (`tell_short`)."""

    #: The page as last answered (asked again where it moved).
    page: T
    #: Nothing is listed past it: the history (the window, the slice) ends with it.
    ended: bool
    #: Records it left out, the same when asked once more (0: none).
    lost: int
    #: Every answer read to tell it (probes, the page again), in order: their records count too.
    read: list[T]
    #: Where records were left out: the probe that showed it, the records just past the page.
    probe: T | None = None
    #: The offset to read on from, past the page and the records its probe showed (None: the
    #: page's own next, a page on).
    after: int | None = None


async def tell_short(
    page: T,
    offset: int,
    size: int,
    *,
    fetch: Callable[[int, int], Coroutine[Any, Any, T]],
    keys: Callable[[T], Sequence[Hashable]],
    max_offset: int | None = None,
    max_reach: int | None = None,
) -> Short[T]:
    """Whether a page of fewer than ``size`` records, answered for ``offset``, ends what is
    paged, proven with one request where it does.

    The offset just past the page is asked for as many records as the page fell short (the
    probe; ``fetch(offset, limit)``), within the operation's ``max_offset`` and ``max_reach``
    (``offset + limit``; none past them can be asked: the page ends what can be read). Empty:
    the page ends it. Records of the page's tail the page left out are in the probe itself, and
    the walk reads on. The page's own records in it (`left_out`) stand for records left
    out before them, or for records that arrived at the head meanwhile and shifted every offset:
    the page is asked again. The same page again: nothing moved, so the records are left out
    of its answers. Another: it is told again (at most `MAX_REFETCHES` times while the history
    keeps moving, then the walk reads on, and a page past the end ends it)."""
    read: list[T] = []
    for _ in range(MAX_REFETCHES):
        held = keys(page)
        after = offset + len(held)
        limit = size - len(held)
        if max_reach is not None:
            limit = min(limit, max_reach - after)
        if limit < 1 or (max_offset is not None and after > max_offset):
            return Short(page, True, 0, read)
        probe = await fetch(after, limit)
        read.append(probe)
        shown = keys(probe)
        lost = left_out(held, shown)
        # An exchange that answers fewer than asked without saying so (a plain array) is read
        # on from past what it answered, so that no offset is skipped.
        past = after + len(shown)
        if not shown or not lost:
            return Short(page, not shown, 0, read, after=past)
        again = await fetch(offset, size)
        read.append(again)
        if keys(again) == held:
            return Short(page, False, lost, read, probe, after=past)
        page = again
        if len(keys(again)) >= size:
            break
    return Short(page, False, 0, read)


def in_range(oldest: int, newest: int, since: int | None, until: int | None) -> bool:
    """Records of these times may lie in ``since <= time < until``."""
    return (since is None or newest >= since) and (until is None or oldest < until)


def left_out(page: Sequence[Hashable], probe: Sequence[Hashable]) -> int:
    """Records a short page left out that its probe does not show: the keys of the page's
    records, and of the probe's (asked at the offset just past the page, for as many records as
    the page fell short, so it covers the rest of the page's positions). A page that left k
    records out shows k fewer, so its probe starts k positions early: each of the page's own
    records it shows again stands for a record left out before it; a left-out record of the
    page's tail is in the probe itself, and is not counted."""
    held = set(page)
    return sum(1 for key in probe if key in held)


def utc_days(times: Iterable[object]) -> str:
    """The UTC day or days of these record times (Unix seconds: integers, decimals, or their
    text), as ``2026-05-03`` or ``2026-05-03..2026-05-05``: where a record left out lies."""
    days = []
    for value in times:
        try:
            seconds = int(Decimal(str(value))) if type(value) in (int, str, Decimal) else None
        except (InvalidOperation, ValueError):
            continue
        if seconds is not None and EARLIEST_TIME <= seconds < _LATEST_TIME:
            days.append(datetime.fromtimestamp(seconds, UTC).date())
    if not days:
        return "days unknown"
    first, last = min(days), max(days)
    return f"{first}" if first == last else f"{first}..{last}"


@dataclass(slots=True)
class Tally:
    """What reading one window or slice found: the keys of its records, the total its latest
    answer states (`spec.PageEnvelope.total`), whether its end was proven (not cut at a reach or
    a range's start), and whether an answer of it was reported as leaving records out."""

    seen: set[Hashable] = field(default_factory=set)
    total: int | None = None
    whole: bool = False
    short: bool = False
    #: Times of records read in it (the first and last of each page), for the days it names.
    times: list[int] = field(default_factory=list)

    @property
    def falls_short(self) -> bool:
        """Read to its end, with no answer reported yet, its records are not the total stated."""
        return self.whole and not self.short and self.total not in (None, len(self.seen))


def short_by(
    history: str, slice: str, days: str, offset: int, held: int, size: int, lost: int
) -> RecordsLeftOut:
    """A page that left records out, again when asked once more."""
    return RecordsLeftOut(
        history,
        slice,
        days,
        f"the answer at offset {offset} held {held} of {size} records though more followed, "
        f"again when asked once more: {lost} record(s) left out",
    )


def short_of_total(history: str, slice: str, days: str, tally: Tally, what: str) -> RecordsLeftOut:
    """A window or slice (``what``) whose records fall short of the total its answers state."""
    return RecordsLeftOut(
        history,
        slice,
        days,
        f"its answers state a total of {tally.total} records and the walk got "
        f"{len(tally.seen)}, again when the {what} was read once more",
    )
