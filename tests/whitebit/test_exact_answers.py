"""The answers of the account's histories: records grouped by market, plain arrays, pages under
another envelope and numbers keyed by ticker checked whole (the envelope refused off the contract,
records passed as received, unknown fields noted at their path); numbers with a fraction exact,
across the writer's pipe too; and the exchange's time of the answer, which follows its clock."""

from __future__ import annotations

import asyncio
import email.utils
import json
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import httpx
import orjson
import pytest

from pipeline import spec
from pipeline.simulator import EPOCH, Simulator
from pipeline.whitebit import ContractError, TimeWindowsWalk, WalkStats
from pipeline.whitebit._clock import ExchangeClock
from pipeline.whitebit._exact import EXACT
from pipeline.whitebit._parse import parse
from pipeline.whitebit._shapes import SHAPES
from tests.support.client import client
from tests.whitebit.ledger_truth import rows
from warehouse.writer import decode, encode

FILL = (
    b'{"id":1,"clientOrderId":"","time":1789000000.000001,"side":"buy","role":1,"amount":"1",'
    b'"price":"2","deal":"2","fee":"0.001","orderId":7,"feeAsset":"BTC"}'
)
SPOT_ORDER = (
    b'{"amount":"1","price":"2","type":"limit","id":5,"clientOrderId":"","side":"buy",'
    b'"ctime":1789000000.5,"ftime":1789000001.25,"dealFee":"0","dealStock":"1","dealMoney":"2",'
    b'"postOnly":false,"ioc":false,"status":"FILLED","feeAsset":"BTC","rpi":false,'
    b'"reduceOnly":false}'
)
CONVERSION = (
    b'{"id":"9","date":1789000000,"give":"1","receive":"3","rate":"3",'
    b'"path":[{"from":"BTC","to":"USDT","rate":"3"}]}'
)


#: A range's start of a few weeks back, so that a walk reads a couple of windows only.
RECENT = datetime.fromtimestamp(EPOCH - 30 * 86_400, UTC)


def _parsed(op: spec.Operation, body: bytes, params: dict[str, Any] | None = None) -> Any:
    unknown: dict[str, str] = {}
    return parse(op, body, unknown, params or {}), unknown


# --- shapes ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("op", "body"),
    [
        (spec.EXECUTED_HISTORY, b'{"BTC_USDT":[' + FILL + b"]}"),
        (spec.EXECUTED_HISTORY, b"[" + FILL + b"]"),
        (spec.EXECUTED_HISTORY, b"{}"),
        (spec.EXECUTED_HISTORY, b"[]"),
        (spec.ORDER_HISTORY, b'{"BTC_USDT":[' + SPOT_ORDER + b"]}"),
        (spec.CONVERT_HISTORY, b'{"records":[' + CONVERSION + b'],"total":1,"limit":1,"offset":0}'),
        (spec.COLLATERAL_BALANCE, b'{"USDT":1000.123456789012345678,"BTC":0}'),
    ],
    ids=["grouped", "flat", "empty-object", "empty-array", "optional-absent", "path", "numbers"],
)
def test_answers_of_the_contract_pass_the_fast_check(op: spec.Operation, body: bytes) -> None:
    """Exactly the spec's fields and types, an optional field absent, an empty group either way:
    the strict whole-answer check says yes at once, nothing unknown."""
    doc, unknown = _parsed(op, body)
    assert SHAPES[op.name].ok(doc)
    assert unknown == {}


ENVELOPES = [
    (spec.EXECUTED_HISTORY, b'{"BTC_USDT":{"id":1}}', "BTC_USDT", "expected an array of records"),
    (spec.ORDER_HISTORY, b'"none"', "(the whole answer)", "expected an object of arrays by m"),
    (spec.POSITIONS_HISTORY, b'{"records":[]}', "(the whole answer)", "expected an array, got"),
    (spec.CONVERT_HISTORY, b'{"records":[],"limit":1,"offset":0}', "total", "a field the spec"),
    (spec.COLLATERAL_BALANCE, b"[1.5]", "(the whole answer)", "expected an object, got an arr"),
    (spec.COLLATERAL_BALANCE, b'{"USDT":1.5,"BTC":0,"USDT":2}', "USDT", "a ticker listed more"),
]


@pytest.mark.parametrize(
    ("op", "body", "field", "reason"), ENVELOPES, ids=[op.name for op, *_ in ENVELOPES]
)
def test_an_envelope_off_the_contract_is_refused(
    op: spec.Operation, body: bytes, field: str, reason: str
) -> None:
    with pytest.raises(ContractError) as info:
        _parsed(op, body)
    assert info.value.field == field
    assert info.value.reason.startswith(reason)


def test_records_off_the_contract_pass_as_received() -> None:
    """A record's fields are data: a time as a string, a market's record that is no object, a
    balance that is text; each passes for the warehouse to judge."""
    odd = b'{"BTC_USDT":[{"id":1,"time":"soon"},7],"ETH_USDT":[]}'
    assert _parsed(spec.EXECUTED_HISTORY, odd)[0] == orjson.loads(odd)
    assert _parsed(spec.COLLATERAL_BALANCE, b'{"USDT":"1.5"}')[0] == {"USDT": "1.5"}


@pytest.mark.parametrize(
    ("op", "body", "named"),
    [
        (
            spec.EXECUTED_HISTORY,
            b'{"BTC_USDT":[' + FILL + b'],"ETH_USDT":[' + FILL[:-1] + b',"x":1}]}',
            "*[].x",
        ),
        (spec.EXECUTED_HISTORY, b"[" + FILL[:-1] + b',"x":1}]', "[].x"),
        (
            spec.CONVERT_HISTORY,
            b'{"records":['
            + CONVERSION.replace(b'"rate":"3"}', b'"rate":"3","x":1}')
            + b'],"total":1,"limit":1,"offset":0}',
            "records[].path[].x",
        ),
    ],
    ids=["grouped", "flat", "array-of-objects"],
)
def test_an_unknown_field_inside_records_is_noted_at_its_path(
    op: spec.Operation, body: bytes, named: str
) -> None:
    doc, unknown = _parsed(op, body, {"market": "BTC_USDT"} if body[:1] == b"[" else {})
    assert unknown == {named: "1"}
    assert doc == _parsed_plain(body)


def test_what_an_error_and_a_new_field_quote_of_an_exact_answer_is_json() -> None:
    """A value quoted from an answer read exactly shows its numbers as the exchange wrote them,
    in JSON, not as Python writes a Decimal."""
    fill = FILL[:-1] + b',"x":{"at":1789000000.000001}}'
    _, unknown = _parsed(spec.EXECUTED_HISTORY, b'{"BTC_USDT":[' + fill + b"]}")
    assert unknown == {"*[].x": '{"at":1789000000.000001}'}
    with pytest.raises(ContractError) as info:  # an object where an array belongs
        _parsed(spec.POSITIONS_HISTORY, b'{"records":[' + FILL + b"]}")
    assert "1789000000.000001" in info.value.body_excerpt
    assert "Decimal" not in info.value.body_excerpt


def _parsed_plain(body: bytes) -> Any:
    return json.loads(body, parse_float=Decimal)


# --- exact numbers -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("history", "fields"),
    [(spec.TRADES, ("time",)), (spec.POSITION_EVENTS, ("openDate", "modifyDate"))],
    ids=lambda v: v.name if isinstance(v, spec.History) else "",
)
def test_times_with_a_fraction_cross_the_writers_pipe_exactly(
    sim: Simulator, history: spec.History, fields: tuple[str, ...]
) -> None:
    """What the walk yields goes to the writer process as JSON and is read back there: each
    time is the same Decimal, of the same digits, on both sides."""

    async def main() -> list[Any]:
        async with client(sim) as c:
            walk = c.walk(history, since=datetime.fromtimestamp(EPOCH - 40 * 86_400, UTC))
            assert isinstance(walk, TimeWindowsWalk)
            return [page async for page in walk]

    pages = asyncio.run(main())
    sent = rows(pages)
    assert len(sent) > 100
    # One rule (`spec.fractional`): the client read these times exactly, and the writer does.
    assert history.operation.name in EXACT
    assert history.exact_numbers
    received = rows(decode(encode(["take", page]), exact=True)[1] for page in pages)
    assert received == sent
    for (_, before), (_, after) in zip(sent, received, strict=True):
        for name in fields:
            assert type(after[name]) is Decimal
            assert str(after[name]) == str(before[name])
    # Read without exactness, a time to the microsecond is a float: not the digits sent.
    floats = rows(decode(encode(["take", page]), exact=False)[1] for page in pages)
    assert any(
        Decimal(a[fields[0]]) != b[fields[0]] for (_, a), (_, b) in zip(floats, sent, strict=True)
    )


def test_histories_without_fractions_go_down_the_pipe_as_before() -> None:
    assert not spec.FUNDING.exact_numbers
    assert not spec.CLOSED_POSITIONS.exact_numbers  # its times are whole seconds
    records = [{"fundingTime": "1789000000", "fundingAmount": "-0.1"}]
    assert decode(encode(["take", records]), exact=False) == ["take", records]


# --- the exchange's time -----------------------------------------------------------------------


def test_the_simulators_date_follows_its_clock(own_sim: Simulator) -> None:
    def date() -> datetime:
        answer = httpx.get(own_sim.url + spec.PING.path)
        (value,) = answer.headers.get_list("date")
        return email.utils.parsedate_to_datetime(value)

    assert date() == datetime.fromtimestamp(EPOCH, UTC)
    assert date() == datetime.fromtimestamp(EPOCH, UTC), "a frozen clock gives a frozen date"
    own_sim.clock.advance(3_600.75)
    assert date() == datetime.fromtimestamp(EPOCH + 3_600, UTC)


def test_a_snapshot_and_a_walk_report_when_the_exchange_answered(own_sim: Simulator) -> None:
    async def main() -> None:
        async with client(own_sim) as c:
            stats = WalkStats(spec.OPEN_POSITIONS_NOW.name)
            positions = await c.snapshot(spec.OPEN_POSITIONS_NOW, stats=stats)
            assert stats.observed_at == datetime.fromtimestamp(EPOCH, UTC)
            assert positions
            assert all(type(p["openDate"]) is Decimal for p in positions)
            links = WalkStats(spec.LINKS.name)
            accounts = own_sim.dataset.mining_accounts
            answer = await c.snapshot(
                spec.LINKS, values={"mining_accounts": accounts, "markets": ("X",)}, stats=links
            )
            assert list(answer) == list(accounts)
            own_sim.clock.advance(86_400)
            walk = c.walk(spec.CLOSED_POSITIONS, since=RECENT)
            async for _ in walk:
                pass
            assert walk.stats.observed_at == datetime.fromtimestamp(EPOCH + 86_400, UTC)
            assert int(await c.exchange_time()) == EPOCH + 86_400

    asyncio.run(main())


def test_a_client_given_a_clock_goes_by_it(own_sim: Simulator) -> None:
    """A clock of the caller's wins over the exchange's Date: here, a day behind it, so the
    walk's newest window ends a day earlier."""

    async def main() -> None:
        async with client(own_sim, clock=lambda: EPOCH - 86_400.0) as c:
            walk = c.walk(spec.CLOSED_POSITIONS, since=RECENT)
            assert isinstance(walk, TimeWindowsWalk)
            async for _ in walk:
                pass
            assert walk.stats.slices[0].endswith("..2026-09-20T14:13:19Z")

    asyncio.run(main())


def test_the_clock_takes_each_dates_second_once_and_ignores_what_is_no_date() -> None:
    clock = ExchangeClock()
    assert not clock.known
    first = "Mon, 21 Sep 2026 14:13:20 GMT"
    assert clock.observe(first) == datetime.fromtimestamp(EPOCH, UTC)
    assert clock.observe(first) == datetime.fromtimestamp(EPOCH, UTC)
    assert clock.known
    assert EPOCH <= clock.now() < EPOCH + 1
    assert clock.observe("soon") is None
    assert clock.observe(None) is None
    assert EPOCH <= clock.now() < EPOCH + 1, "what is no date changes nothing"
    assert clock.observe("Mon, 21 Sep 2026 14:13:25 GMT") == datetime.fromtimestamp(EPOCH + 5, UTC)
    assert EPOCH + 5 <= clock.now() < EPOCH + 6
    assert ExchangeClock(lambda: 12.5).now() == 12.5
