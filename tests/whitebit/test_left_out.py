"""A record left out of one answer, for each paged history (every declared history walked newest
first, in time windows or by offset window: a new declaration joins with no edit), walked whole
against the simulator over loopback: left out of the first, a middle and the last page of a
window, every other record is yielded and the walk raises `RecordsLeftOut` naming the history
and the record's day; left out of one answer only, the answer asked once more brings it. And a
total the records do not meet (conversions answering ``total`` one more than they list)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any, NamedTuple

import orjson
import pytest

from pipeline import spec
from pipeline.simulator import Scale, SimClock, Simulator, left_out
from pipeline.whitebit import RecordsLeftOut
from tests.support.client import client
from tests.support.simulated import FROZEN_AT
from tests.whitebit.ledger_truth import rows

PAGED = [
    h
    for h in spec.HISTORIES.values()
    if isinstance(h.paging, spec.NewestFirst | spec.TimeWindows | spec.OffsetWindow)
]
#: The exchange's pages hold at most this many records: a month's window takes several.
CAP = 25
DAYS = re.compile(r"of (\d{4}-\d\d-\d\d)(?:\.\.(\d{4}-\d\d-\d\d))? \(UTC\)")


@pytest.fixture(scope="module")
def capped() -> Iterator[Simulator]:
    with Simulator(seed=7, scale=Scale.small(), clock=SimClock(FROZEN_AT), rate_limits=False) as s:
        s.state.page_cap = CAP
        yield s


def _window(params: dict[str, Any]) -> bytes:
    """What names a request's window or slice: its parameters but the offset and the limit."""
    rest = {k: v for k, v in params.items() if k not in ("offset", "limit")}
    return orjson.dumps(rest, option=orjson.OPT_SORT_KEYS)


def _count(body: bytes) -> int:
    doc = orjson.loads(body)
    if isinstance(doc, list):
        return len(doc)
    if "offset" in doc:
        return len(doc.get("records", doc.get("data", [])))
    return sum(len(group) for group in doc.values() if isinstance(group, list))


class Walked(NamedTuple):
    rows: list[bytes]
    error: RecordsLeftOut | None
    #: Each page answered: (its window, offset, limit asked, records answered).
    answers: list[tuple[bytes, int, int, int]]


def _walk(sim: Simulator, history: spec.History, tamper: Callable[..., bytes] | None) -> Walked:
    answers: list[tuple[bytes, int, int, int]] = []

    def watch(params: dict[str, Any], body: bytes) -> bytes:
        out = tamper(params, body) if tamper is not None else body
        answers.append((_window(params), params["offset"], params["limit"], _count(out)))
        return out

    sim.faults.tamper(history.operation.path, watch)

    async def main() -> tuple[list[Any], RecordsLeftOut | None]:
        async with client(sim) as c:
            pages: list[Any] = []
            try:
                async for page in c.walk(history):
                    pages += [page]  # each as it comes: those before the error count
            except RecordsLeftOut as error:
                return pages, error
            return pages, None

    try:
        pages, error = asyncio.run(main())
    finally:
        sim.faults.tamper(history.operation.path, None)
    found = [orjson.dumps(row, default=str, option=orjson.OPT_SORT_KEYS) for row in rows(pages)]
    return Walked(found, error, answers)


_TRUTH: dict[str, Walked] = {}


def _truth(sim: Simulator, history: spec.History) -> Walked:
    if history.name not in _TRUTH:
        _TRUTH[history.name] = _walk(sim, history, None)
    return _TRUTH[history.name]


def _paged(history: spec.History, params: dict[str, Any]) -> bool:
    """A request for a page, not for the records just past a short one (asked for fewer): its
    limit the operation's largest, or the capped one the walk follows where the answer says it
    (a plain array, or records by market, do not)."""
    return params["limit"] in (CAP, history.operation.bound("limit"))


def _pages(history: spec.History, truth: Walked) -> tuple[bytes, list[tuple[int, int]]]:
    """The window or slice of the most pages, and its pages of two records or more (of one,
    where no window holds more: the pending flows of the frozen clock): (offset, records)."""
    by_window: dict[bytes, dict[int, int]] = {}
    for least in (2, 1):
        for window, offset, limit, count in truth.answers:
            if _paged(history, {"limit": limit}) and count >= least:
                by_window.setdefault(window, {})[offset] = count
        if by_window:
            break
    window = max(by_window, key=lambda w: len(by_window[w]))
    return window, sorted(by_window[window].items())


def _time_field(history: spec.History) -> str | None:
    paging = history.paging
    if isinstance(paging, spec.TimeWindows):
        return history.operation.window.applies_to  # type: ignore[union-attr]
    return paging.time  # type: ignore[union-attr]


def _day(history: spec.History, row: bytes) -> date | None:
    field = _time_field(history)
    if field is None:
        return None
    _, record = orjson.loads(row)
    return datetime.fromtimestamp(int(Decimal(str(record[field]))), UTC).date()


@pytest.mark.parametrize("where", ["first", "middle", "last"])
@pytest.mark.parametrize("history", PAGED, ids=lambda h: h.name)
def test_a_record_left_out_of_every_answer_of_a_page_costs_that_record_and_is_named(
    capped: Simulator, history: spec.History, where: str
) -> None:
    truth = _truth(capped, history)
    assert truth.error is None
    window, pages = _pages(history, truth)
    assert pages, f"{history.name}: a window of pages of two records or more"
    offset, count = {"first": pages[0], "middle": pages[len(pages) // 2], "last": pages[-1]}[where]
    # Not the page's last record: one of the page's tail is in the records just past it.
    index = (count - 1) // 2
    gone = left_out(
        index,
        when=lambda p: _window(p) == window and p["offset"] == offset and _paged(history, p),
        answers=None,
    )
    walked = _walk(capped, history, gone)
    assert set(walked.rows) <= set(truth.rows)
    missing = set(truth.rows) - set(walked.rows)
    assert len(missing) == 1, "that record alone is missing"
    assert len(walked.rows) == len(set(walked.rows)), "no record twice"
    error = walked.error
    assert error is not None, "a record left out is said"
    message = str(error)
    assert message.startswith(f"{history.name} ")
    if count > 1:
        # A plain array does not say the page size it keeps to: the walk's is the operation's.
        said = rf"the answer at offset {offset} held {count - 1} of \d+ records"
    else:
        # Its only record left out, the page is empty, as at the end: the total tells.
        said = "its answers state a total of"
    assert re.search(said, message)
    day = _day(history, missing.pop())
    if day is None:
        assert "of days unknown (UTC)" in message
    else:
        found = DAYS.search(message)
        assert found is not None
        first, last = found.group(1), found.group(2) or found.group(1)
        assert first <= day.isoformat() <= last


@pytest.mark.parametrize("history", PAGED, ids=lambda h: h.name)
def test_a_record_left_out_of_one_answer_is_read_when_the_page_is_asked_again(
    capped: Simulator, history: spec.History
) -> None:
    truth = _truth(capped, history)
    window, pages = _pages(history, truth)
    offset, count = pages[0]
    once = left_out(
        (count - 1) // 2,
        when=lambda p: _window(p) == window and p["offset"] == offset and _paged(history, p),
        answers=1,
    )
    walked = _walk(capped, history, once)
    assert walked.error is None
    assert sorted(walked.rows) == sorted(truth.rows)


def test_a_total_the_records_do_not_meet_is_read_again_then_said(capped: Simulator) -> None:
    """Conversions answering ``total`` one more than the records they list, in every answer."""
    history = spec.CONVERSIONS
    truth = _truth(capped, history)

    def more(params: dict[str, object], body: bytes) -> bytes:
        page = orjson.loads(body)
        page["total"] += 1
        return orjson.dumps(page)

    walked = _walk(capped, history, more)
    assert sorted(walked.rows) == sorted(truth.rows), "every record is yielded"
    assert walked.error is not None
    message = str(walked.error)
    window = re.search(r"window (\S+)", message)
    assert window is not None
    # The window is read twice: its first page answered twice.
    starts = [a for a in walked.answers if a[1] == 0 and a[0] == _first_window(walked)]
    assert len(starts) == 2
    stated = re.search(r"a total of (\d+) records and the walk got (\d+)", message)
    assert stated is not None
    assert int(stated.group(1)) == int(stated.group(2)) + 1
    assert message.startswith("conversions window 20")


def _first_window(walked: Walked) -> bytes:
    return walked.answers[0][0]
