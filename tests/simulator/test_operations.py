"""Every operation's success shape and every validation rule, over real loopback HTTP."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from pipeline import spec
from pipeline.simulator import Simulator
from tests.support.signing import post

DECIMAL = re.compile(r"^-?\d+(\.\d{1,18})?$")


def _check_shape(value: Any, fields: tuple[spec.Field, ...]) -> None:
    """The record has exactly the spec's fields, each of the spec's JSON type."""
    assert set(value) == {f.name for f in fields}, value
    for f in fields:
        v = value[f.name]
        if v is None:
            assert f.nullable, f.name
        elif f.type is spec.FieldType.DECIMAL:
            assert isinstance(v, str), (f.name, v)
            assert DECIMAL.match(v), (f.name, v)
        elif f.type is spec.FieldType.TIMESTAMP_STRING:
            assert isinstance(v, str), (f.name, v)
            assert v.isdigit(), (f.name, v)
        elif f.type in (spec.FieldType.INTEGER, spec.FieldType.TIMESTAMP):
            assert type(v) is int, (f.name, v)
        elif f.type is spec.FieldType.STRING:
            assert isinstance(v, str), (f.name, v)
        elif f.type is spec.FieldType.BOOLEAN:
            assert type(v) is bool
        elif f.type is spec.FieldType.STRING_LIST:
            assert isinstance(v, list)
            assert all(isinstance(x, str) for x in v)
        else:
            _check_shape(v, f.fields)


def _ok(sim: Simulator, op: spec.Operation, params: dict[str, Any]) -> Any:
    r = post(sim.url, op.path, params, sim.credentials)
    assert r.status_code == 200, r.text
    return r.json()


def test_ping(sim: Simulator) -> None:
    r = httpx.get(sim.url + spec.PING.path)
    assert (r.status_code, r.json()) == (200, ["pong"])
    refused = httpx.post(sim.url + spec.PING.path)
    assert refused.status_code == 405
    assert refused.json() == {"success": False, "message": "Method not allowed", "params": []}


def test_investments_page(sim: Simulator) -> None:
    body = _ok(sim, spec.INVESTMENTS_HISTORY, {"limit": 100, "offset": 0})
    assert (body["offset"], body["limit"], len(body["records"])) == (0, 100, 100)
    for record in body["records"]:
        _check_shape(record, spec.INVESTMENT_FIELDS)
    created = [r["created"] for r in body["records"]]
    assert created == sorted(created, reverse=True)


def test_investments_filters(sim: Simulator) -> None:
    data = sim.dataset.investments
    ticker = data.tickers[1]
    body = _ok(sim, spec.INVESTMENTS_HISTORY, {"ticker": ticker, "status": 2, "limit": 100})
    assert body["records"]
    assert all(r["plan"]["ticker"] == ticker and r["status"] == 2 for r in body["records"])
    one = data.all()[5]
    assert _ok(sim, spec.INVESTMENTS_HISTORY, {"id": one["id"]})["records"] == [one]


def test_investments_cover_every_status(sim: Simulator) -> None:
    records = sim.dataset.investments.all()
    assert {r["status"] for r in records} == set(spec.INVESTMENT_STATUSES)
    assert {r["plan"]["status"] for r in records} == set(spec.PLAN_STATUSES)
    assert len({r["plan"]["ticker"] for r in records}) >= 3


def test_funding_page_newest_first_with_hedge_pairs(sim: Simulator) -> None:
    body = _ok(sim, spec.FUNDING_HISTORY, {"limit": 100})
    records = body["records"]
    assert len(records) == 100
    for record in records:
        _check_shape(record, spec.FUNDING_ENTRY_FIELDS)
        assert spec.PERP_MARKET_PATTERN.match(record["market"])
    times = [int(r["fundingTime"]) for r in records]
    assert times == sorted(times, reverse=True)
    assert all(t % (8 * 3600) == 0 for t in times)
    pairs = [r for r in records if r["market"] == sim.dataset.funding.hedged_market]
    same_time = {}
    for r in pairs:
        same_time.setdefault(r["fundingTime"], []).append(r["positionAmount"])
    assert any(len(v) == 2 and v[0][0] != "-" and v[1][0] == "-" for v in same_time.values())


def test_funding_per_market_and_the_last_page_is_short(sim: Simulator) -> None:
    market = sorted(sim.dataset.funding.market_names)[1]
    total = len(sim.dataset.funding.newest_first(market))
    last = (total // 100) * 100
    body = _ok(sim, spec.FUNDING_HISTORY, {"market": market, "offset": last, "limit": 100})
    assert len(body["records"]) == total - last < 100
    assert {r["market"] for r in body["records"]} == {market}
    beyond = _ok(sim, spec.FUNDING_HISTORY, {"market": market, "offset": total + 500})
    assert beyond["records"] == []


def test_decimals_look_like_real_ones(sim: Simulator) -> None:
    values = [v for r in sim.dataset.funding.newest_first() for k, v in r.items()
              if k not in ("market", "fundingTime", "rateCalculatedTime")]  # fmt: skip
    places = {len(v.partition(".")[2]) for v in values}
    assert 0 in places
    assert 18 in places
    assert len(places) > 8
    assert "0" in values
    assert any(v.startswith("-") for v in values)
    balances = [b["main_balance"] for b in sim.dataset.main_balance.values()]
    assert any(abs(float(v)) >= 1e12 for v in values + balances)


def test_balances(sim: Simulator) -> None:
    main = _ok(sim, spec.MAIN_BALANCE, {})
    assert main == sim.dataset.main_balance
    for balance in main.values():
        _check_shape(balance, spec.MAIN_BALANCE_FIELDS)
    # An unknown ticker is a zero balance, not an error.
    assert _ok(sim, spec.MAIN_BALANCE, {"ticker": "NOPE"}) == {"NOPE": {"main_balance": "0"}}
    trading = _ok(sim, spec.TRADING_BALANCE, {})
    assert trading
    for balance in trading.values():
        _check_shape(balance, spec.TRADING_BALANCE_FIELDS)
        assert balance != {"available": "0", "freeze": "0"}
    hidden = [t for t, b in sim.dataset.trading_balance.items() if b["available"] == "0"]
    assert hidden
    assert not set(hidden) & set(trading)
    assert _ok(sim, spec.TRADING_BALANCE, {"ticker": hidden[0]}) == {
        hidden[0]: {"available": "0", "freeze": "0"}
    }


def test_hedge_mode(sim: Simulator) -> None:
    body = _ok(sim, spec.HEDGE_MODE, {})
    _check_shape(body, spec.HEDGE_MODE_FIELDS)


def test_watcher_links(sim: Simulator) -> None:
    account = sim.dataset.mining_accounts[0]
    links = _ok(sim, spec.WATCHER_LINKS, {"account": account})["data"]
    for link in links:
        _check_shape(link, spec.WATCHER_LINK_FIELDS)
        assert link["link"].endswith("/mining-pool/watcher-link/" + link["id"])
    assert any(link["liveUntil"] is None for link in links)
    assert any(link["liveUntil"] is not None for link in links)


def _refused(sim: Simulator, op: spec.Operation, params: dict[str, Any]) -> httpx.Response:
    r = post(sim.url, op.path, params, sim.credentials)
    assert r.status_code != 200, r.text
    return r


def _int_cases(op: spec.Operation) -> list[tuple[spec.Operation, str, Any]]:
    cases: list[tuple[spec.Operation, str, Any]] = []
    for p in op.params:
        if p.kind is int:
            cases += [(op, p.name, "10"), (op, p.name, True), (op, p.name, 1.0)]
            if p.minimum is not None:
                cases.append((op, p.name, p.minimum - 1))
            if p.maximum is not None:
                cases.append((op, p.name, p.maximum + 1))
    return cases


INT_CASES = _int_cases(spec.INVESTMENTS_HISTORY) + _int_cases(spec.FUNDING_HISTORY)


@pytest.mark.parametrize(("op", "name", "value"), INT_CASES, ids=lambda v: repr(v))
def test_integer_rules(sim: Simulator, op: spec.Operation, name: str, value: Any) -> None:
    r = _refused(sim, op, {name: value})
    assert (r.status_code, r.json()["code"]) == (op.validation.status, op.validation.code)
    assert r.json()["message"] == "Validation failed"
    assert list(r.json()["errors"]) == [name]


def test_integer_bounds_accept_their_ends(sim: Simulator) -> None:
    for op in (spec.INVESTMENTS_HISTORY, spec.FUNDING_HISTORY):
        for p in op.params:
            for end in (p.minimum, p.maximum):
                if p.kind is int and end is not None:
                    _ok(sim, op, {p.name: end})


@pytest.mark.parametrize(
    ("params", "field"),
    [({"ticker": "NOPE"}, "ticker"), ({"id": "no-such-id"}, "id"), ({"ticker": 5}, "ticker")],
)
def test_investments_unknown_values(sim: Simulator, params: dict[str, Any], field: str) -> None:
    r = _refused(sim, spec.INVESTMENTS_HISTORY, params)
    assert r.status_code == 400
    assert r.json()["code"] == 0
    assert list(r.json()["errors"]) == [field]
    if field != "ticker" or params[field] == "NOPE":
        assert r.json()["errors"][field] == [f"The selected {field} is invalid."]


@pytest.mark.parametrize("market", ["NOPE_PERP", "BTC_USDT", "btc_perp", ""])
def test_funding_market_must_be_a_known_perpetual(sim: Simulator, market: str) -> None:
    r = _refused(sim, spec.FUNDING_HISTORY, {"market": market})
    assert (r.status_code, r.json()["code"], list(r.json()["errors"])) == (422, 31, ["market"])


def test_watcher_account_rules(sim: Simulator) -> None:
    too_long = _refused(sim, spec.WATCHER_LINKS, {"account": "a" * 256})
    assert (too_long.status_code, list(too_long.json()["errors"])) == (400, ["account"])
    unknown = _refused(sim, spec.WATCHER_LINKS, {"account": "a" * 255})
    assert unknown.json()["errors"] == {"user": [f"Mining pool account '{'a' * 255}' not found"]}
    missing = _refused(sim, spec.WATCHER_LINKS, {})
    assert missing.json()["errors"] == {"account": ["validation.required"]}


def test_reset_key_rules(sim: Simulator) -> None:
    missing = _refused(sim, spec.RESET_SUBACCOUNT_KEY, {})
    assert missing.json() == {
        "code": 0,
        "message": "Validation failed",
        "errors": {"apiKeyId": ["validation.required"]},
    }
    not_uuid = _refused(sim, spec.RESET_SUBACCOUNT_KEY, {"apiKeyId": "123"})
    assert (not_uuid.status_code, list(not_uuid.json()["errors"])) == (400, ["apiKeyId"])
    unknown = _refused(
        sim, spec.RESET_SUBACCOUNT_KEY, {"apiKeyId": "00000000-0000-4000-8000-000000000000"}
    )
    assert (unknown.status_code, unknown.json()) == (404, {"message": "API key not found"})
    # The partner's own key is not a sub-account key.
    own = _refused(sim, spec.RESET_SUBACCOUNT_KEY, {"apiKeyId": sim.keys["partner"].key_id})
    assert own.status_code == 404


def test_unknown_routes_and_methods_answer_an_empty_404(sim: Simulator) -> None:
    for r in (
        httpx.post(sim.url + "/api/v4/no/such/thing"),
        httpx.get(sim.url + spec.MAIN_BALANCE.path),
    ):
        assert (r.status_code, r.content) == (404, b"")
