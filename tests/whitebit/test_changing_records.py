"""Records that change while an offset-window walk reads them, and fields the documentation names
two ways: against the simulator over loopback, its clock stepped between two slices of one walk,
or its answers in the spelling of WhiteBIT's OpenAPI file."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest

from pipeline import spec
from pipeline.simulator import Scale, SimClock, Simulator, Spelling
from pipeline.whitebit import OffsetWindowWalk
from tests.support.client import client
from tests.support.simulated import FROZEN_AT
from warehouse import normalize

DEPOSITS = spec.MAIN_ACCOUNT_HISTORY
HOUR = 3_600
#: The small scale's deposit 186 is pending (15) from 41.9 h after the epoch and credited (3)
#: at 43.0 h: the walk starts before, and the clock passes it between two slices.
BEFORE, AFTER = FROZEN_AT + 42 * HOUR + HOUR // 2, FROZEN_AT + 43 * HOUR + HOUR // 2
#: Pages of 20, a window of 60 records: the small account's last 25 days fill it, and a walk
#: of them splits by method, as a deep account's fill the real window of 10,000.
SHALLOW_OPERATION = replace(
    DEPOSITS,
    params=tuple(replace(p, maximum=20) if p.name == "limit" else p for p in DEPOSITS.params),
    max_reach=60,
)
SHALLOW = replace(spec.DEPOSITS_WITHDRAWALS, operation=SHALLOW_OPERATION)


@pytest.fixture
def settling() -> Iterator[Simulator]:
    with Simulator(seed=7, scale=Scale.small(), clock=SimClock(BEFORE), rate_limits=False) as s:
        yield s


def movements(sim: Simulator, at: float) -> list[dict[str, Any]]:
    """Every deposit and withdrawal as it stands at ``at``, newest first."""
    ledger = sim.dataset.ledger
    ledger.current()
    at_us = int(at * 1_000_000)
    count = len(ledger.movements)
    return [orjson.loads(ledger.status(n, at_us)[0]) for n in range(count - 1, -1, -1)]


def walked(sim: Simulator, history: spec.History, **options: Any) -> tuple[list[Any], Any]:
    """The walk's records, in the order yielded, and its stats."""

    async def main() -> tuple[list[Any], Any]:
        async with client(sim) as c:
            walk = OffsetWindowWalk(c, history, on_window_exceeded="raise", **options)
            pages = [page async for page in walk]
            return pages, walk.stats

    pages, stats = asyncio.run(main())
    if pages and type(pages[0]) is dict:
        return [(owner, r) for page in pages for owner, rs in page.items() for r in rs], stats
    return [r for page in pages for r in page], stats


NAMES = spec.aliases(spec.TRANSACTION_FIELDS) | spec.aliases(spec.TRANSFER_FIELDS)


def as_openapi(record: dict[str, Any]) -> dict[str, Any]:
    """A record as WhiteBIT's OpenAPI file names its fields, the order of its keys kept."""
    return {NAMES.get(name, name): value for name, value in record.items()}


def as_camel(record: dict[str, Any]) -> dict[str, Any]:
    back = {alias: name for name, alias in NAMES.items()}
    return {back.get(name, name): value for name, value in record.items()}


@pytest.mark.parametrize(
    ("change", "spelling"), [("status", "camel"), ("status", "openapi"), ("amount", "camel")]
)
def test_a_record_read_again_in_a_later_state_lands_once_in_it(
    settling: Simulator, change: str, spelling: Spelling
) -> None:
    """A deposit settles between the walk's unsplit slice and its split ones: it lands once, in
    the state read last, and the stats name the change, its identity read under either name.
    Read again differing in a field that does not change (its amount), it is another record
    under the same identity: both go on, for the warehouse to reject, never one dropped in
    silence."""
    sim = settling
    sim.spelling = spelling
    since, until = int(BEFORE) - 25 * 86_400, int(BEFORE)
    before, after = movements(sim, BEFORE), movements(sim, AFTER)
    in_range = [r for r in after if since <= r["createdAt"] < until]
    [moved] = [a for b, a in zip(before, after, strict=True) if a["status"] != b["status"]]
    assert moved["status"] == 3
    assert moved in in_range
    per_method = [sum(r["method"] == m for r in in_range) for m in (1, 2)]
    assert len(in_range) > 60 > max(per_method), "the unsplit slice fills the window"
    stepped: list[float] = []

    def step(params: dict[str, object], body: bytes) -> bytes:
        """Once the first page has been answered, the clock passes the deposit's credit."""
        if not stepped:
            stepped.append(sim.clock.advance(AFTER - BEFORE))
        return body

    def tamper(params: dict[str, object], body: bytes) -> bytes:
        """The split slices' answers show the deposit with another amount."""
        if params.get("transactionMethod") is None:
            return body
        page = orjson.loads(body)
        for record in page["records"]:
            if record["transactionId"] == moved["transactionId"]:
                record["amount"] = "1"
        return orjson.dumps(page)

    sim.faults.tamper(DEPOSITS.path, step if change == "status" else tamper)
    rows, stats = walked(sim, SHALLOW, since=since, until=until)
    if spelling == "openapi":
        rows = [as_camel(r) for r in rows]
    assert stats.slices[:3] == ["all", "transactionMethod=1", "transactionMethod=2"]
    mine = [r for r in rows if r["transactionId"] == moved["transactionId"]]
    others = [r for r in rows if r["transactionId"] != moved["transactionId"]]
    truth = after if change == "status" else before
    assert others == [
        r
        for r in truth
        if since <= r["createdAt"] < until and r["transactionId"] != moved["transactionId"]
    ]
    if change == "status":
        assert mine == [moved]
        assert rows.index(moved) == in_range.index(moved), "in its place, newest first"
        [note] = [n for n in stats.notes if moved["transactionId"] in n]
        assert note == (
            f"transactionId {moved['transactionId']} changed while the walk read it (status 15 "
            '-> 3, confirmations {"actual":1,"required":4} -> {"actual":4,"required":4}): its '
            "latest state is kept"
        )
    else:
        pending = next(r for r in before if r["transactionId"] == moved["transactionId"])
        assert mine == [pending, dict(pending, amount="1")]
        assert not any("changed while" in n for n in stats.notes)


#: Each history whose records carry a field the documentation names two ways.
SPELLED = (spec.DEPOSITS_WITHDRAWALS, spec.PENDING_FLOWS, spec.SUBACCOUNT_TRANSFERS_HISTORY)


def test_either_spelling_walks_and_normalizes_to_the_same_rows(settling: Simulator) -> None:
    """The simulator answers in the OpenAPI file's spelling: each walk reads the same records
    under the other names, nothing unknown, and normalization makes the same rows of them."""
    sim = settling
    at = datetime.fromtimestamp(BEFORE, UTC)
    rows: dict[str, list[Any]] = {}
    for spelling in ("camel", "openapi"):
        sim.spelling = spelling
        for history in SPELLED:
            records, stats = walked(sim, history)
            assert stats.unknown_fields == {}
            rows[f"{spelling} {history.name}"] = records
    for history in SPELLED:
        camel, openapi = rows[f"camel {history.name}"], rows[f"openapi {history.name}"]
        assert camel, history.name
        if history is spec.SUBACCOUNT_TRANSFERS_HISTORY:
            assert openapi == [(owner, as_openapi(r)) for owner, r in camel]
            answers = [
                {owner: [r for o, r in records if o == owner] for owner, _ in records}
                for records in (camel, openapi)
            ]
        else:
            assert openapi == [as_openapi(r) for r in camel]
            assert "transaction_id" in openapi[0]
            assert "transactionId" not in openapi[0]
            answers = [camel, openapi]
        batches = [
            normalize.normalize(history, answer, extracted_at=at, day=at.date(), observed_at=at)
            for answer in answers
        ]
        assert batches[0].rejected == batches[1].rejected == 0
        assert batches[1].rows.equals(batches[0].rows), history.name
        assert batches[0].normalized == len(camel)


def test_collects_that_differ_only_in_a_field_the_spec_does_not_name_agree(
    own_sim: Simulator,
) -> None:
    """The balances are asked together until two collects agree on what the warehouse reads: a
    field the exchange adds to some answers and not others (a schema drift caught mid-rollout,
    or the fault matrix's extra field) is no disagreement; a balance that moved still is."""
    answers = 0

    def drifting(params: dict[str, object], body: bytes) -> bytes:
        nonlocal answers
        answers += 1
        doc = orjson.loads(body)
        if answers % 2:  # every other answer: a new field in each balance, a new value each time
            for balance in doc.values():
                balance["updatedAt"] = answers
        return orjson.dumps(doc)

    own_sim.faults.tamper(spec.MAIN_BALANCE.path, drifting)

    async def together() -> Any:
        async with client(own_sim) as c:
            return await c.together(spec.TOGETHER)

    taken = asyncio.run(together())
    assert (taken.collects, taken.consistent) == (2, True)
    assert answers == 2
