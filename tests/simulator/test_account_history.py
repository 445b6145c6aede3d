"""The rest of the account over real loopback HTTP: deposits and withdrawals, sub-accounts and
their transfers, collateral positions and balances; their pages, bounds and error bodies."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from decimal import Decimal
from typing import Any

import httpx
import pytest

from pipeline import spec
from pipeline.simulator import EPOCH, Simulator
from tests.simulator.ledger_reading import check_shape, every, ok
from tests.support.signing import post

DAY = 86_400
REACH = "Offset is too big. Please use offset + limit less than 10000."


def _refused(sim: Simulator, op: spec.Operation, params: dict[str, Any]) -> httpx.Response:
    r = post(sim.url, op.path, params, sim.credentials)
    assert r.status_code != 200, r.text
    return r


# --- Deposits and withdrawals ------------------------------------------------------------------


def test_deposits_and_withdrawals_page_newest_first(sim: Simulator) -> None:
    creds = sim.credentials
    page = ok(sim, spec.MAIN_ACCOUNT_HISTORY, {"limit": 20}, creds)
    assert list(page) == ["limit", "offset", "records", "total"]
    assert (page["limit"], page["offset"], len(page["records"])) == (20, 0, 20)
    whole = every(sim, spec.MAIN_ACCOUNT_HISTORY, {}, creds)
    assert len(whole) == page["total"]
    assert whole[:20] == page["records"]
    created = [r["createdAt"] for r in whole]
    assert created == sorted(created, reverse=True)
    for record in whole:
        check_shape(record, spec.TRANSACTION_FIELDS)
        statuses = spec.DEPOSIT_STATUSES if record["method"] == 1 else spec.WITHDRAWAL_STATUSES
        assert record["status"] in statuses
    assert len({r["transactionId"] for r in whole}) == len(whole)


def test_filters(sim: Simulator) -> None:
    creds = sim.credentials
    whole = every(sim, spec.MAIN_ACCOUNT_HISTORY, {}, creds)
    for params, keep in (
        ({"transactionMethod": 1}, lambda r: r["method"] == 1),
        # ccxt's fetchWithdrawals and the Go SDK send the method as a string.
        ({"transactionMethod": "2"}, lambda r: r["method"] == 2),
        ({"ticker": "BTC"}, lambda r: r["ticker"] == "BTC"),
        (
            {"transactionMethod": 1, "status": [3, 7]},
            lambda r: r["method"] == 1 and r["status"] in spec.SUCCESSFUL,
        ),
        ({"address": whole[3]["address"]}, lambda r: r["address"] == whole[3]["address"]),
        (
            {"addresses": [whole[1]["address"], whole[2]["address"]]},
            lambda r: r["address"] in (whole[1]["address"], whole[2]["address"]),
        ),
        ({"uniqueId": whole[0]["uniqueId"]}, lambda r: r["uniqueId"] == whole[0]["uniqueId"]),
    ):
        found = every(sim, spec.MAIN_ACCOUNT_HISTORY, params, creds)
        assert found == [r for r in whole if keep(r)], params
        assert found, params
    # The docs' snake_case unique_id is not the service's name: ignored, like any unknown key.
    assert every(sim, spec.MAIN_ACCOUNT_HISTORY, {"unique_id": "1"}, creds) == whole


def test_every_documented_status_appears_and_pending_ones_settle(sim: Simulator) -> None:
    ledger = sim.dataset.ledger
    ledger.current()
    seen: dict[int, set[int]] = defaultdict(set)
    for number in range(len(ledger.movements)):
        method = ledger.movements.value("method", number)
        assert isinstance(method, int)
        seen[method] |= {status for _, _, status in ledger.stages[number]}
        final = ledger.stages[number][-1]
        settles_within = final[0] - ledger.movements.times[number]
        assert settles_within <= 2 * DAY * 1_000_000
        assert final[2] in (spec.DEPOSIT_FINAL if method == 1 else spec.WITHDRAWAL_FINAL)
    assert seen[1] == set(spec.DEPOSIT_STATUSES)
    assert seen[2] == set(spec.WITHDRAWAL_STATUSES)
    # At the epoch some are still on their way: a poll by status finds them.
    pending = []
    for method, final in ((1, spec.DEPOSIT_FINAL), (2, spec.WITHDRAWAL_FINAL)):
        statuses = {1: spec.DEPOSIT_STATUSES, 2: spec.WITHDRAWAL_STATUSES}[method].keys() - final
        params = {"transactionMethod": method, "status": sorted(statuses)}
        pending += every(sim, spec.MAIN_ACCOUNT_HISTORY, params, sim.credentials)
    assert pending
    assert all(r["status"] not in spec.SUCCESSFUL for r in pending)


def test_a_pending_record_settles_in_its_place(own_sim: Simulator) -> None:
    creds = own_sim.credentials
    before = every(own_sim, spec.MAIN_ACCOUNT_HISTORY, {}, creds)
    finals = spec.DEPOSIT_FINAL | spec.WITHDRAWAL_FINAL

    def final(record: dict[str, Any]) -> bool:
        done = spec.DEPOSIT_FINAL if record["method"] == 1 else spec.WITHDRAWAL_FINAL
        return record["status"] in done

    waiting = [r for r in before if not final(r)]
    assert waiting
    own_sim.clock.advance(2 * DAY + 3600)
    after = every(own_sim, spec.MAIN_ACCOUNT_HISTORY, {}, creds)
    fresh = len(after) - len(before)
    assert fresh > 0  # new records at the head
    assert [r["transactionId"] for r in after[fresh:]] == [r["transactionId"] for r in before]
    by_id = {r["transactionId"]: r for r in after}
    for record in waiting:
        settled = by_id[record["transactionId"]]
        assert settled["status"] in finals
        assert settled["createdAt"] == record["createdAt"]
    # Records already final are as they were.
    moved = {w["transactionId"] for w in waiting}
    assert [r for r in after[fresh:] if r["transactionId"] not in moved] == [
        r for r in before if r["transactionId"] not in moved
    ]


@pytest.mark.parametrize(
    ("params", "errors"),
    [
        ({"limit": 501}, {"limit": ["The limit may not be greater than 500."]}),
        ({"limit": 0}, {"limit": ["The limit must be at least 1."]}),
        ({"offset": 10_001}, {"offset": ["The offset may not be greater than 10000."]}),
        ({"offset": -1}, {"offset": ["The offset must be at least 0."]}),
        ({"limit": "many"}, {"limit": ["The limit must be an integer."]}),
        (
            {"offset": 9_950, "limit": 100},
            {"offset": [REACH]},
        ),
        (
            {"transactionMethod": 3},
            {"transactionMethod": ["The selected transaction method is invalid."]},
        ),
        ({"ticker": "NOPE"}, {"ticker": ["The selected ticker is invalid."]}),
        ({"status": [99]}, {"status": ["The selected status is invalid."]}),
        ({"transactionMethod": 1, "status": [1]}, {"status": ["The selected status is invalid."]}),
        (
            {"addresses": ["a"] * 21},
            {"addresses": ["The addresses may not have more than 20 items."]},
        ),
        # WhiteBit.Net sends one address as a string; the Go SDK an array under `address`.
        ({"addresses": "a"}, {"addresses": ["The addresses must be an array."]}),
        ({"address": ["a", "b"]}, {"address": ["The address must be a string."]}),
    ],
)
def test_deposit_history_errors(
    sim: Simulator, params: dict[str, Any], errors: dict[str, list[str]]
) -> None:
    r = _refused(sim, spec.MAIN_ACCOUNT_HISTORY, params)
    assert (r.status_code, r.json()) == (
        400,
        {"code": 0, "message": "Validation failed", "errors": errors},
    )


def test_the_last_reachable_page(sim: Simulator) -> None:
    page = ok(sim, spec.MAIN_ACCOUNT_HISTORY, {"offset": 9_500, "limit": 500}, sim.credentials)
    assert page["records"] == []  # past the end of a small account's history, yet reachable
    r = _refused(sim, spec.MAIN_ACCOUNT_HISTORY, {"offset": 10_000, "limit": 1})
    assert r.json()["errors"] == {"offset": [REACH]}


def test_the_openapi_spelling_names_a_record_field_as_the_openapi_file_does(
    own_sim: Simulator,
) -> None:
    """Switched through the control API: a deposit's ``transaction_id`` and ``unique_id``, a
    transfer's ``transaction_id``; every other field, and every other answer, as before."""
    creds = own_sim.credentials
    deposits = ok(own_sim, spec.MAIN_ACCOUNT_HISTORY, {}, creds)
    sub = ok(own_sim, spec.SUBACCOUNT_LIST, {}, creds)["data"][0]
    transfers = ok(own_sim, spec.SUBACCOUNT_TRANSFERS, {"id": sub["id"]}, creds)
    switched = httpx.post(f"{own_sim.url}/_simulator/limits", json={"spelling": "openapi"})
    assert switched.status_code == 200
    assert own_sim.spelling == "openapi"
    for op, page, under, fields in (
        (spec.MAIN_ACCOUNT_HISTORY, deposits, "records", spec.TRANSACTION_FIELDS),
        (spec.SUBACCOUNT_TRANSFERS, transfers, "data", spec.TRANSFER_FIELDS),
    ):
        names = spec.aliases(fields)
        spelled = [{names.get(k, k): v for k, v in record.items()} for record in page[under]]
        params = {"id": sub["id"]} if op is spec.SUBACCOUNT_TRANSFERS else {}
        assert ok(own_sim, op, params, creds) == {**page, under: spelled}
        openapi = tuple(replace(f, name=f.alias or f.name) for f in fields)
        for record in spelled:
            check_shape(record, openapi)
    assert ok(own_sim, spec.SUBACCOUNT_LIST, {}, creds)["data"][0] == sub
    with pytest.raises(ValueError, match="camel, openapi"):
        own_sim.spelling = "snake_case"  # type: ignore[assignment]


# --- Sub-accounts ------------------------------------------------------------------------------


def test_sub_accounts_and_their_transfers(sim: Simulator) -> None:
    creds = sim.credentials
    listed = ok(sim, spec.SUBACCOUNT_LIST, {}, creds)
    assert (listed["offset"], listed["limit"]) == (0, 30)
    subs = listed["data"]
    assert [s["alias"] for s in subs] == sim.subaccount_roles
    for sub in subs:
        check_shape(sub, spec.SUBACCOUNT_FIELDS)
    assert ok(sim, spec.SUBACCOUNT_LIST, {"search": "SUB_2"}, creds)["data"] == subs[1:2]
    assert ok(sim, spec.SUBACCOUNT_LIST, {"offset": 1, "limit": 1}, creds)["data"] == subs[1:2]
    seen = set()
    for sub in subs:
        page = ok(sim, spec.SUBACCOUNT_TRANSFERS, {"id": sub["id"], "limit": 5}, creds)
        assert (page["offset"], page["limit"]) == (0, 5)
        whole = every(sim, spec.SUBACCOUNT_TRANSFERS, {"id": sub["id"]}, creds)
        assert whole[:5] == page["data"]
        assert whole
        for t in whole:
            check_shape(t, spec.TRANSFER_FIELDS)
            assert t["id"] == t["transactionId"]
        ids = [t["transactionId"] for t in whole]
        assert ids == sorted(ids, reverse=True)  # time-ordered ids, newest first
        one_way = {"id": sub["id"], "direction": "main_to_sub"}
        to_sub = every(sim, spec.SUBACCOUNT_TRANSFERS, one_way, creds)
        assert to_sub == [t for t in whole if t["direction"] == "main_to_sub"]
        assert not seen & set(ids)  # each transfer is one sub-account's
        seen |= set(ids)


def test_sub_account_errors_and_permissions(sim: Simulator) -> None:
    missing = _refused(sim, spec.SUBACCOUNT_TRANSFERS, {})
    assert (missing.status_code, missing.json()["errors"]) == (400, {"id": ["validation.required"]})
    unknown = _refused(
        sim, spec.SUBACCOUNT_TRANSFERS, {"id": "00000000-0000-4000-8000-000000000000"}
    )
    assert unknown.json()["errors"] == {"id": ["The selected id is invalid."]}
    sub_id = ok(sim, spec.SUBACCOUNT_LIST, {}, sim.credentials)["data"][0]["id"]
    too_far = _refused(sim, spec.SUBACCOUNT_TRANSFERS, {"id": sub_id, "offset": 9_990, "limit": 20})
    assert too_far.json()["errors"] == {"offset": [REACH]}
    direction = _refused(sim, spec.SUBACCOUNT_TRANSFERS, {"id": sub_id, "direction": "both"})
    assert direction.json()["errors"] == {"direction": ["The selected direction is invalid."]}
    # A sub-account's key manages no sub-accounts.
    for op, params in ((spec.SUBACCOUNT_LIST, {}), (spec.SUBACCOUNT_TRANSFERS, {"id": sub_id})):
        r = post(sim.url, op.path, params, sim.credentials_for("sub_1"))
        assert (r.status_code, r.json()["code"]) == (403, 4)


# --- Collateral --------------------------------------------------------------------------------


def test_position_events_follow_the_funding_history(sim: Simulator) -> None:
    creds = sim.credentials
    events = every(sim, spec.POSITIONS_HISTORY, {}, creds)
    funding = every(sim, spec.FUNDING_HISTORY, {}, creds)
    for event in events[:200]:
        check_shape(event, spec.POSITION_EVENT_FIELDS)
    modified = [e["modifyDate"] for e in events]
    assert modified == sorted(modified, reverse=True)
    # Each funding entry's position is the position its market's slot held at that time.
    by_slot: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for e in reversed(events):
        by_slot[(e["market"], e["side"])].append(e)
    for entry in funding[:300]:
        t = int(entry["fundingTime"])
        amount = Decimal(entry["positionAmount"])
        sides = ("BOTH", "LONG" if amount > 0 else "SHORT")
        held = [
            Decimal(e["amount"])
            for side in sides
            for e in by_slot[(entry["market"], side)]
            if e["modifyDate"] < t
        ]
        assert held
        assert held[-1] == amount, entry
    # A position's funding is its funding entries': realizedFunding sums them.
    one = events[len(events) // 2]
    same = every(sim, spec.POSITIONS_HISTORY, {"positionId": one["positionId"]}, creds)
    assert {e["positionId"] for e in same} == {one["positionId"]}
    first, last = same[-1], same[0]
    paid = [
        Decimal(f["fundingAmount"])
        for f in funding
        if f["market"] == one["market"]
        and first["modifyDate"] < int(f["fundingTime"]) < last["modifyDate"]
        and (Decimal(f["positionAmount"]) > 0) == (Decimal(first["amount"]) > 0)
    ]
    assert Decimal(last["realizedFunding"]) == sum(paid)
    fees = [Decimal(e["orderDetail"]["fundingFee"] or 0) for e in same[:-1]]
    assert sum(fees) == Decimal(last["realizedFunding"])


def test_closed_positions_aggregate_their_events(sim: Simulator) -> None:
    creds = sim.credentials
    closed = every(sim, spec.CLOSED_PNL, {}, creds)
    assert closed
    order = [(c["closeDate"], c["positionId"]) for c in closed]
    assert order == sorted(order, reverse=True)
    for c in closed[:40]:
        check_shape(c, spec.CLOSED_POSITION_FIELDS)
        events = every(sim, spec.POSITIONS_HISTORY, {"positionId": c["positionId"]}, creds)
        fees = sum(Decimal(e["orderDetail"]["tradeFee"]) for e in events)
        pnl = sum(Decimal(e["orderDetail"]["realizedPnl"] or 0) for e in events)
        reduced = [e for e in events if e["orderDetail"]["realizedPnl"] is not None]
        assert Decimal(c["totalTradeFee"]) == fees
        assert Decimal(c["grossPnl"]) == pnl - fees
        assert Decimal(c["totalFunding"]) == -Decimal(events[0]["realizedFunding"])
        assert Decimal(c["netPnl"]) == Decimal(c["grossPnl"]) - Decimal(c["totalFunding"])
        closed_size = sum(Decimal(e["orderDetail"]["tradeAmount"]) for e in reduced)
        assert Decimal(c["closedSize"]) == closed_size
        assert c["amount"] == "0"
        assert events[0]["amount"] == "0"
        assert c["openDate"] == int(events[-1]["openDate"])
        assert c["closeDate"] == int(events[0]["modifyDate"])
        assert c["avgEntryPrice"] == events[0]["basePrice"]
    window = {"startDate": closed[5]["closeDate"], "endDate": closed[2]["closeDate"]}
    assert every(sim, spec.CLOSED_PNL, window, creds) == [
        c for c in closed if window["startDate"] <= c["closeDate"] <= window["endDate"]
    ]


def test_open_positions_and_collateral_balances(sim: Simulator) -> None:
    creds = sim.credentials
    held = ok(sim, spec.OPEN_POSITIONS, {}, creds)
    events = every(sim, spec.POSITIONS_HISTORY, {}, creds)
    latest: dict[int, dict[str, Any]] = {}
    for e in reversed(events):
        latest[e["positionId"]] = e
    still_open = {p for p, e in latest.items() if e["amount"] != "0"}
    assert [h["positionId"] for h in held] == sorted(still_open)
    for h in held:
        check_shape(h, spec.OPEN_POSITION_FIELDS)
        last = latest[h["positionId"]]
        assert (h["amount"], h["basePrice"]) == (last["amount"], last["basePrice"])
        assert (h["funding"], h["unrealizedFunding"]) == ("0", "0")
    market = held[0]["market"]
    one = ok(sim, spec.OPEN_POSITIONS, {"market": market}, creds)
    assert one == [h for h in held if h["market"] == market]
    balance = ok(sim, spec.COLLATERAL_BALANCE, {}, creds)
    summary = ok(sim, spec.COLLATERAL_BALANCE_SUMMARY, {}, creds)
    for row in summary:
        check_shape(row, spec.BALANCE_SUMMARY_FIELDS)
    # The balance's numbers are the summary's decimals, digit for digit.
    assert {r["asset"]: Decimal(r["balance"]) for r in summary} == balance
    assert ok(sim, spec.COLLATERAL_BALANCE, {"ticker": "XRP"}, creds) == {"XRP": 0}
    r = post(sim.url, spec.COLLATERAL_BALANCE.path, {"ticker": "NOPE"}, creds)
    assert (r.status_code, r.json()) == (
        422,
        {"code": 30, "message": "Validation failed", "errors": {"ticker": ["ticker is invalid."]}},
    )


@pytest.mark.parametrize(
    ("op", "params", "errors"),
    [
        (
            spec.POSITIONS_HISTORY,
            {"limit": 101},
            {"limit": ["Limit should not be greater than 100."]},
        ),
        (
            spec.POSITIONS_HISTORY,
            {"endDate": EPOCH + 60},
            {"endDate": ["EndDate should not be greater than the current time."]},
        ),
        (
            spec.POSITIONS_HISTORY,
            {"startDate": EPOCH, "endDate": EPOCH - 1},
            {"startDate": ["StartDate should not be greater than endDate."]},
        ),
        (spec.POSITIONS_HISTORY, {"market": "NOPE_PERP"}, {"market": ["Market is not available"]}),
        (spec.CLOSED_PNL, {"offset": 9_950, "limit": 100}, {"offset": [REACH]}),
        (spec.CLOSED_PNL, {"limit": 0}, {"limit": ["Limit should be at least 1."]}),
        (spec.OPEN_POSITIONS, {"market": "btc"}, {"market": ["Market field format is invalid."]}),
    ],
)
def test_collateral_errors(
    sim: Simulator, op: spec.Operation, params: dict[str, Any], errors: dict[str, list[str]]
) -> None:
    r = _refused(sim, op, params)
    assert (r.status_code, r.json()) == (
        422,
        {"code": 30, "message": "Validation failed", "errors": errors},
    )


def test_ccxt_position_history_limit_bug_is_refused(sim: Simulator) -> None:
    """ccxt's fetchPositionHistory writes its ``since`` (milliseconds) into ``limit``."""
    since = EPOCH * 1000
    bug = {"market": "BTC_PERP", "startDate": since, "limit": since}
    r = _refused(sim, spec.POSITIONS_HISTORY, bug)
    assert r.json()["errors"] == {"limit": ["Limit should not be greater than 100."]}
    # Without a limit its millisecond start is read as seconds far ahead: nothing matches.
    far = {"market": "BTC_PERP", "startDate": since}
    assert ok(sim, spec.POSITIONS_HISTORY, far, sim.credentials) == []
