"""How the client takes an answer, against the simulator over loopback: records pass as received
(the warehouse judges them), fields the spec does not name are tolerated and reported, an
envelope off the contract or a ticker listed twice is refused, and smaller pages than asked are
followed without losing or repeating a record."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import httpx
import orjson
import pytest

from pipeline import spec
from pipeline.simulator import Fault, Simulator, new_field, repeated_key
from pipeline.whitebit import NO_RETRIES, ContractError, WalkStats
from tests.support.client import Watching, client, collect, raises

FUNDING, INVESTMENTS = spec.FUNDING_HISTORY.path, spec.INVESTMENTS_HISTORY.path
MAIN, TRADING = spec.MAIN_BALANCE.path, spec.TRADING_BALANCE.path
HEDGE, LINKS = spec.HEDGE_MODE.path, spec.WATCHER_LINKS.path

Edit = Callable[[Any], Any]


def _each_record(match: Callable[[Any], bool], edit: Edit) -> Callable[[Any, bytes], bytes]:
    """A tamper that replaces every record ``match`` picks, wherever a page lists it."""

    def rewrite(params: Any, body: bytes) -> bytes:
        page = orjson.loads(body)
        page["records"] = [edit(r) if match(r) else r for r in page["records"]]
        return orjson.dumps(page)

    return rewrite


def _without(name: str) -> Edit:
    return lambda record: {k: v for k, v in record.items() if k != name}


def _with(name: str, value: Any) -> Edit:
    return lambda record: {**record, name: value}


# --- Records pass as received ------------------------------------------------------------------

FUNDING_EDITS: dict[str, Edit] = {
    "missing-field": _without("settlementPrice"),
    "null": _with("fundingRate", None),
    "number-for-string": _with("fundingAmount", 0.5),
    # The fields the walk keys and orders by: the record is passed on in its place all the same.
    "missing-market": _without("market"),
    "null-time": _with("fundingTime", None),
    "integer-time": _with("fundingTime", 1789286400),
    "array-market": _with("market", ["BTC_PERP"]),
    "number-position": _with("positionAmount", -1.5),
    "not-an-object": lambda record: "a record",
    "null-record": lambda record: None,
}


@pytest.mark.parametrize("index", [40, 99], ids=["inside-a-page", "the-overlap-record"])
@pytest.mark.parametrize("edit", FUNDING_EDITS, ids=list(FUNDING_EDITS))
def test_a_funding_record_off_the_contract_is_passed_in_its_place(
    own_sim: Simulator, edit: str, index: int
) -> None:
    """Record 99 is the last of the first page and the first of the second: the record the walk
    finds again to prove there is no gap. Broken, it must still be found, and yielded once."""
    truth = own_sim.dataset.funding.newest_first()
    target = truth[index]
    own_sim.faults.tamper(FUNDING, _each_record(lambda r: r == target, FUNDING_EDITS[edit]))
    expected = [FUNDING_EDITS[edit](r) if r == target else r for r in truth]

    async def main() -> None:
        async with client(own_sim) as c:
            walk = c.walk(spec.FUNDING)
            rows = await collect(walk)
        assert rows == expected
        assert walk.stats.retries == 0
        assert walk.stats.unknown_fields == {}

    asyncio.run(main())


INVESTMENT_EDITS: dict[str, Edit] = {
    "missing-id": _without("id"),
    "null-id": _with("id", None),
    "string-status": _with("status", "1"),
    "plan-not-an-object": _with("plan", None),
    "plan-ticker-a-number": lambda r: {**r, "plan": {**r["plan"], "ticker": 5}},
    "plan-ticker-a-list": lambda r: {**r, "plan": {**r["plan"], "ticker": ["BTC"]}},
    "not-an-object": lambda record: [record["id"]],
}


@pytest.mark.parametrize("edit", INVESTMENT_EDITS, ids=list(INVESTMENT_EDITS))
def test_an_investment_off_the_contract_is_passed_once(own_sim: Simulator, edit: str) -> None:
    truth = own_sim.dataset.investments.all()
    targets = [truth[3], truth[4]]  # two of them: without an id, each is told by its content
    own_sim.faults.tamper(INVESTMENTS, _each_record(lambda r: r in targets, INVESTMENT_EDITS[edit]))
    expected = [INVESTMENT_EDITS[edit](r) if r in targets else r for r in truth]

    async def main() -> None:
        async with client(own_sim) as c:
            walk = c.walk(spec.INVESTMENTS)
            rows = await collect(walk)
        key = orjson.OPT_SORT_KEYS
        assert sorted(orjson.dumps(r, option=key) for r in rows) == sorted(
            orjson.dumps(r, option=key) for r in expected
        )
        assert walk.stats.duplicates_dropped == 0

    asyncio.run(main())


@pytest.mark.parametrize(
    ("path", "call", "body"),
    [
        (MAIN, "main_balance", b'{"USDT":{"main_balance":1.5},"BTC":"zero","ETH":{}}'),
        (TRADING, "trading_balance", b'{"USDT":{"available":"1"},"BTC":null}'),
        (HEDGE, "hedge_mode", b'{"hedgeMode":"true"}'),
        (HEDGE, "hedge_mode", b"{}"),
    ],
)
def test_a_single_answers_records_pass_as_received(
    own_sim: Simulator, path: str, call: str, body: bytes
) -> None:
    own_sim.faults.tamper(path, lambda params, sent: body)

    async def main() -> None:
        async with client(own_sim, retry=NO_RETRIES) as c:
            assert await getattr(c, call)() == orjson.loads(body)

    asyncio.run(main())


def test_a_watcher_links_record_off_the_contract_passes_as_received(own_sim: Simulator) -> None:
    account = own_sim.dataset.mining_accounts[0]
    links = own_sim.dataset.watcher_links[account]
    odd = [{k: v for k, v in links[0].items() if k != "liveUntil"}, 7, *links[1:]]
    own_sim.faults.tamper(LINKS, lambda params, body: orjson.dumps({"data": odd}))

    async def main() -> None:
        async with client(own_sim, retry=NO_RETRIES) as c:
            assert await c.watcher_links(account) == odd

    asyncio.run(main())


@pytest.mark.parametrize("fault", [Fault.MISSING_FIELD, Fault.NUMBER_FOR_STRING])
def test_the_simulators_record_drift_is_data_not_a_failure(
    own_sim: Simulator, fault: Fault
) -> None:
    own_sim.faults.script([fault], paths=[FUNDING])

    async def main() -> None:
        async with client(own_sim, retry=NO_RETRIES) as c:
            page = await c.funding_history(limit=5)
        truth = own_sim.dataset.funding.newest_first()[:5]
        assert page["records"][1:] == truth[1:]
        assert page["records"][0] != truth[0]  # the first record drifted, and is passed on

    asyncio.run(main())


# --- The envelope is the contract ----------------------------------------------------------------

ENVELOPES = [
    (FUNDING, b'{"offset":0,"limit":100,"records":null}', "records", "expected an array, got null"),
    (FUNDING, b'{"offset":0,"limit":100,"records":{}}', "records", "expected an array, got an obj"),
    (FUNDING, b'{"offset":0,"limit":100}', "records", "a field the spec requires is missing"),
    (FUNDING, b'{"offset":"0","limit":100,"records":[]}', "offset", "expected an integer, got a s"),
    (FUNDING, b"[]", "(the whole answer)", "expected an object, got an array"),
    (INVESTMENTS, b'{"offset":0,"records":[]}', "limit", "a field the spec requires is missing"),
    (MAIN, b'["USDT"]', "(the whole answer)", "expected an object, got an array"),
    (HEDGE, b"true", "(the whole answer)", "expected an object, got a boolean"),
    (LINKS, b'{"data":"none"}', "data", "expected an array, got a string"),
    # Not JSON from the first character: a page of HTML is the same on the next try.
    (FUNDING, b"<html>Maintenance</html>", "(the whole answer)", "a success answer that is not"),
    (HEDGE, b"NaN", "(the whole answer)", "a success answer that is not JSON at all"),
]


@pytest.mark.parametrize(
    ("path", "body", "field", "reason"), ENVELOPES, ids=[f"{p} {b!r}" for p, b, _, _ in ENVELOPES]
)
def test_an_envelope_off_the_contract_is_refused_after_one_quick_retry(
    own_sim: Simulator, path: str, body: bytes, field: str, reason: str
) -> None:
    own_sim.faults.tamper(path, lambda params, sent: body)
    calls: dict[str, Callable[[Any], Any]] = {
        FUNDING: lambda c: collect(c.walk(spec.FUNDING)),
        INVESTMENTS: lambda c: collect(c.walk(spec.INVESTMENTS)),
        MAIN: lambda c: c.main_balance(),
        HEDGE: lambda c: c.hedge_mode(),
        LINKS: lambda c: c.watcher_links(own_sim.dataset.mining_accounts[0]),
    }

    async def main() -> None:
        async with client(own_sim) as c:
            with raises(ContractError) as info:
                await calls[path](c)
        assert info.value.field == field
        assert info.value.reason.startswith(reason)
        assert info.value.attempts == 2
        assert not info.value.retryable

    asyncio.run(main())
    assert own_sim.state.answered[(path, 200)] == 2


@pytest.mark.parametrize(
    ("body", "refused"), [(b'["pong","v2"]', False), (b"[]", True), (b'{"pong":true}', True)]
)
def test_ping_wants_pong_and_tolerates_more(own_sim: Simulator, body: bytes, refused: bool) -> None:
    own_sim.faults.tamper(spec.PING.path, lambda params, sent: body)

    async def main() -> None:
        async with client(own_sim, retry=NO_RETRIES) as c:
            if not refused:
                await c.ping()
                return
            with raises(ContractError) as info:
                await c.ping()
            assert info.value.reason == 'expected an array holding "pong"'

    asyncio.run(main())


def test_an_error_body_with_a_success_status_is_still_the_error(own_sim: Simulator) -> None:
    own_sim.faults.tamper(HEDGE, lambda params, body: b'{"success":false,"message":"Maintenance"}')

    async def main() -> None:
        async with client(own_sim, retry=NO_RETRIES) as c:
            with raises(Exception) as info:
                await c.hedge_mode()
        assert "HTTP 200" in str(info.value)
        assert "Maintenance" in str(info.value)
        assert not isinstance(info.value, ContractError)

    asyncio.run(main())


# --- Fields the spec does not name --------------------------------------------------------------


def _links_of_first_account(sim: Simulator) -> Callable[[Any], Any]:
    return lambda c, stats: c.watcher_links(sim.dataset.mining_accounts[0], stats=stats)


UNKNOWN = [
    (FUNDING, "records", "records[].leverage"),
    (FUNDING, "top", "leverage"),
    (INVESTMENTS, "records", "records[].leverage"),
    (MAIN, "values", "USDT.leverage"),
    (TRADING, "values", "USDT.leverage"),
    (HEDGE, "top", "leverage"),
    (LINKS, "records", "data[].leverage"),
    (LINKS, "top", "leverage"),
]


@pytest.mark.parametrize(("path", "where", "named"), UNKNOWN, ids=[n for _, _, n in UNKNOWN])
def test_a_field_the_spec_does_not_name_is_tolerated_and_reported(
    own_sim: Simulator, caplog: pytest.LogCaptureFixture, path: str, where: Any, named: str
) -> None:
    clean: dict[str, Any] = {}
    calls: dict[str, Callable[[Any, WalkStats], Any]] = {
        FUNDING: lambda c, stats: c.funding_history(stats=stats),
        INVESTMENTS: lambda c, stats: c.investments_history(status=1, stats=stats),
        MAIN: lambda c, stats: c.main_balance(stats=stats),
        TRADING: lambda c, stats: c.trading_balance(stats=stats),
        HEDGE: lambda c, stats: c.hedge_mode(stats=stats),
        LINKS: _links_of_first_account(own_sim),
    }

    async def main() -> tuple[Any, WalkStats]:
        stats = WalkStats("test")
        async with client(own_sim, retry=NO_RETRIES) as c:
            clean["answer"] = await calls[path](c, WalkStats("clean"))
            own_sim.faults.tamper(path, new_field("leverage", {"max": "10"}, where))
            return await calls[path](c, stats), stats

    answer, stats = asyncio.run(main())
    assert stats.unknown_fields == {named: '{"max":"10"}'}
    assert stats.retries == 0
    assert _without_field(answer, "leverage") == clean["answer"]  # as received, nothing else
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(named in line and "tolerated" in line for line in said), said


def _without_field(value: Any, name: str) -> Any:
    if isinstance(value, dict):
        return {k: _without_field(v, name) for k, v in value.items() if k != name}
    if isinstance(value, list):
        return [_without_field(v, name) for v in value]
    return value


def test_a_walk_reports_each_unknown_field_once_with_one_example(own_sim: Simulator) -> None:
    truth = own_sim.dataset.funding.newest_first()
    counter = iter(range(1_000_000))

    def tamper(params: Any, body: bytes) -> bytes:
        page = orjson.loads(body)
        page["records"] = [{**r, "seq": next(counter)} for r in page["records"]]
        return orjson.dumps(page)

    own_sim.faults.tamper(FUNDING, tamper)

    async def main() -> None:
        async with client(own_sim) as c:
            walk = c.walk(spec.FUNDING)
            rows = await collect(walk)
        assert [_without_field(r, "seq") for r in rows] == truth
        assert list(walk.stats.unknown_fields) == ["records[].seq"]
        assert walk.stats.unknown_fields["records[].seq"].isdigit()

    asyncio.run(main())


def test_an_unknown_field_of_a_plan_is_named_by_its_path(own_sim: Simulator) -> None:
    def tamper(params: Any, body: bytes) -> bytes:
        page = orjson.loads(body)
        for record in page["records"]:
            record["plan"]["riskLevel"] = "low"
        return orjson.dumps(page)

    own_sim.faults.tamper(INVESTMENTS, tamper)

    async def main() -> None:
        async with client(own_sim) as c:
            walk = c.walk(spec.INVESTMENTS)
            await collect(walk)
        assert walk.stats.unknown_fields == {"records[].plan.riskLevel": '"low"'}

    asyncio.run(main())


def test_the_simulators_extra_field_is_tolerated(own_sim: Simulator) -> None:
    own_sim.faults.script([Fault.EXTRA_FIELD], paths=[FUNDING])

    async def main() -> None:
        stats = WalkStats("test")
        async with client(own_sim, retry=NO_RETRIES) as c:
            page = await c.funding_history(limit=5, stats=stats)
        assert stats.unknown_fields == {"records[].unexpectedField": '"drift"'}
        assert (
            _without_field(page["records"], "unexpectedField")
            == (own_sim.dataset.funding.newest_first()[:5])
        )

    asyncio.run(main())


# --- A ticker listed twice ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "call", "again"),
    [
        (MAIN, "main_balance", {"main_balance": "1000000"}),
        (MAIN, "main_balance", None),  # even the same balance again: the answer is not sound
        (TRADING, "trading_balance", {"available": "0", "freeze": "0"}),
    ],
)
def test_a_ticker_listed_twice_is_refused_naming_it(
    own_sim: Simulator, path: str, call: str, again: Any
) -> None:
    body = own_sim.state.main_body if path == MAIN else own_sim.state.trading_body
    ticker = next(iter(orjson.loads(body)))
    own_sim.faults.tamper(path, repeated_key(again))

    async def main() -> None:
        async with client(own_sim) as c:
            with raises(ContractError) as info:
                await getattr(c, call)()
        assert info.value.field == ticker
        assert f"at {ticker}: a ticker listed more than once" in str(info.value)
        assert info.value.attempts == 2

    asyncio.run(main())


def test_a_field_listed_twice_in_a_balance_is_refused_naming_both(own_sim: Simulator) -> None:
    body = b'{"USDT":{"main_balance":"1","main_balance":"2"},"BTC":{"main_balance":"0"}}'
    own_sim.faults.tamper(MAIN, lambda params, sent: body)

    async def main() -> None:
        async with client(own_sim, retry=NO_RETRIES) as c:
            with raises(ContractError) as info:
                await c.main_balance()
        assert info.value.field == "USDT.main_balance"
        assert '["1","2"]' in info.value.body_excerpt

    asyncio.run(main())


# --- Smaller pages than asked ---------------------------------------------------------------------


def test_a_capped_funding_history_is_walked_whole(own_sim: Simulator) -> None:
    own_sim.page_cap = 50
    truth = own_sim.dataset.funding.newest_first()

    async def main() -> None:
        async with client(own_sim) as c:
            walk = c.walk(spec.FUNDING)
            rows = await collect(walk)
        assert rows == truth
        assert walk.stats.notes == [
            "the exchange answered pages of 50 records when asked for 100: the walk went on "
            "with pages of 50"
        ]
        assert walk.stats.duplicates_dropped == 0

    asyncio.run(main())


def test_a_capped_funding_history_is_walked_whole_per_market(own_sim: Simulator) -> None:
    own_sim.page_cap = 30
    truth = own_sim.dataset.funding.newest_first()
    markets = sorted(own_sim.dataset.funding.market_names)[:3]

    async def main() -> None:
        async with client(own_sim) as c:
            walk = c.walk(spec.FUNDING, values={"markets": markets})
            rows = await collect(walk)
        assert rows == [r for r in truth if r["market"] in markets]
        assert len(walk.stats.notes) == 1

    asyncio.run(main())


def test_a_cap_that_begins_mid_walk_loses_nothing(own_sim: Simulator) -> None:
    """Pages already asked ahead with the larger size are answered capped too: their offsets no
    longer fit the walk, which asks again."""
    truth = own_sim.dataset.funding.newest_first()

    async def cap_after_three(request: httpx.Request) -> None:
        if len(watch.sent) == 4:
            own_sim.page_cap = 40

    watch = Watching(on_request=cap_after_three)

    async def main() -> None:
        async with client(own_sim, transport=watch) as c:
            walk = c.walk(spec.FUNDING)
            rows = await collect(walk)
        assert rows == truth
        assert "pages of 40" in walk.stats.notes[0]

    asyncio.run(main())


def test_capped_investments_split_by_the_exchanges_page_size(sim_at: Any) -> None:
    s = sim_at("investments=20000,tickers=4")
    s.page_cap = 50
    data = s.dataset.investments
    assert data.count(status=1) > 10_050  # the window bites, with pages of 50 even more

    async def main() -> None:
        async with client(s) as c:
            walk = c.walk(spec.INVESTMENTS)
            rows = await collect(walk)
        assert sorted(r["id"] for r in rows) == sorted(data.ids)
        assert walk.window.limit == 50
        assert walk.window.reachable == 10_050
        assert walk.stats.complete
        assert any(",ticker=" in name for name in walk.stats.slices)

    asyncio.run(main())


@pytest.mark.parametrize(
    ("edit", "field", "reason"),
    [
        (lambda page: {**page, "limit": 200}, "limit", "asked for limit 100, the answer says 200"),
        (lambda page: {**page, "limit": 0}, "limit", "asked for limit 100, the answer says 0"),
        (
            lambda page: {**page, "limit": 20},  # 100 records under a limit of 20
            "records",
            "asked for at most 20 records, the answer has 100",
        ),
        (
            lambda page: {**page, "limit": 1, "records": page["records"][:1]},
            "limit",
            "pages of 1 record cannot overlap",
        ),
    ],
    ids=["limit-higher", "limit-zero", "more-records-than-its-limit", "pages-of-one"],
)
def test_a_page_size_the_walk_cannot_follow_is_refused(
    own_sim: Simulator, edit: Edit, field: str, reason: str
) -> None:
    own_sim.faults.tamper(FUNDING, lambda params, body: orjson.dumps(edit(orjson.loads(body))))

    async def main() -> None:
        async with client(own_sim, retry=NO_RETRIES) as c:
            with raises(ContractError) as info:
                await collect(c.walk(spec.FUNDING))
        assert info.value.field == field
        assert info.value.reason.startswith(reason)

    asyncio.run(main())
