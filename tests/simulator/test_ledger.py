"""One consistent ledger behind every answer: between two moments, each account's holdings
(main + trading + collateral + its active investments, per asset) change by exactly the flows its
histories list (the interest its investments paid among them); the
data is the seed's, grows only at its head, and is each account's and region's own."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import orjson
import pytest

from pipeline import spec
from pipeline.simulator import EPOCH, Credentials, Dataset, Scale, SimClock, Simulator
from tests.simulator.ledger_reading import (
    balances,
    change,
    every,
    flows_between,
    investments_state,
    movements_effect,
    ok,
    sum_of,
)
from tests.support.signing import post

DAY = 86_400
#: The histories a night reads, and a request that pages each of them.
HISTORIES: list[tuple[spec.Operation, dict[str, Any]]] = [
    (spec.EXECUTED_HISTORY, {"limit": 100, "offset": 40}),
    (spec.ORDER_HISTORY, {"limit": 100}),
    (spec.CONVERT_HISTORY, {"from": EPOCH - 29 * DAY, "to": EPOCH}),
    (spec.MAIN_ACCOUNT_HISTORY, {"limit": 100}),
    (spec.POSITIONS_HISTORY, {"limit": 100}),
    (spec.CLOSED_PNL, {"limit": 100}),
    (spec.OPEN_POSITIONS, {}),
    (spec.COLLATERAL_BALANCE_SUMMARY, {}),
    (spec.MAIN_BALANCE, {}),
    (spec.TRADING_BALANCE, {}),
]


def _bodies(sim: Simulator, creds: Credentials) -> list[bytes]:
    return [post(sim.url, op.path, params, creds).content for op, params in HISTORIES]


def _reconcile(sim: Simulator, roles: list[str], steps: list[int]) -> None:
    """For each clock step and each account: the change of its balances is its flows."""
    main = sim.credentials
    subs = {s["alias"]: s["id"] for s in ok(sim, spec.SUBACCOUNT_LIST, {}, main)["data"]}

    def state(role: str) -> tuple[dict[str, Decimal], dict[str, Decimal]]:
        """The account's holdings (its balances and the principal of its active investments),
        and what its running totals say moved them (deposits and withdrawals, interest)."""
        creds = sim.credentials_for(role)
        invested, interest = investments_state(sim, creds)
        moved = movements_effect(every(sim, spec.MAIN_ACCOUNT_HISTORY, {}, creds))
        return sum_of(balances(sim, creds), invested), sum_of(moved, interest)

    t1 = int(sim.clock.now())
    before = {role: state(role) for role in roles}
    for step in steps:
        sim.clock.advance(step)
        t2 = int(sim.clock.now())
        after = {role: state(role) for role in roles}
        transfers = {
            name: every(sim, spec.SUBACCOUNT_TRANSFERS, {"id": id_}, main)
            for name, id_ in subs.items()
        }
        for role in roles:
            if role in subs:
                listed, to_sub = transfers[role], True
            else:
                listed, to_sub = [t for ts in transfers.values() for t in ts], False
            creds = sim.credentials_for(role)
            flows = flows_between(sim, creds, t1, t2, transfers=listed, to_sub=to_sub)
            moved = change(before[role][1], after[role][1])
            listed_flows = change(
                {}, {k: flows.get(k, 0) + moved.get(k, 0) for k in {*flows, *moved}}
            )
            assert change(before[role][0], after[role][0]) == listed_flows, (role, t1, t2)
            assert listed_flows, role  # something did move
        t1, before = t2, after


def test_balances_change_by_exactly_the_listed_flows(own_sim: Simulator) -> None:
    """From the epoch: the main account and both sub-accounts, over a few days, a week and a
    single funding round."""
    _reconcile(own_sim, ["partner", "sub_1", "sub_2"], [3 * DAY + 1_234, 7 * DAY + 5, 8 * 3600])


def test_an_eu_account_reconciles_too() -> None:
    with Simulator(
        seed=7, scale=Scale.small(), clock=SimClock(EPOCH + 40 * DAY), region="eu", subaccounts=1
    ) as sim:
        _reconcile(sim, ["partner", "sub_1"], [2 * DAY + 77])


def test_a_clock_before_the_epoch_reconciles() -> None:
    """Before the epoch a balance is its anchor less what moves up to the epoch."""
    with Simulator(seed=5, scale=Scale.small(), clock=SimClock(EPOCH - 5 * DAY - 999)) as sim:
        _reconcile(sim, ["partner", "sub_2"], [DAY, 5 * DAY])


def test_balances_at_the_epoch_keep_their_shape(sim: Simulator) -> None:
    main = ok(sim, spec.MAIN_BALANCE, {}, sim.credentials)
    assert main["SHIB"] == {"main_balance": "1234567890123.123456789012345678"}
    assert main["XLM"] == {"main_balance": "0"}
    trading = ok(sim, spec.TRADING_BALANCE, {}, sim.credentials)
    hidden = set(main) - set(trading)
    assert hidden
    for ticker in hidden:
        zero = ok(sim, spec.TRADING_BALANCE, {"ticker": ticker}, sim.credentials)
        assert zero == {ticker: {"available": "0", "freeze": "0"}}
    assert any(b["freeze"] != "0" for b in trading.values())


def test_amounts_fit_decimal_38_18(sim: Simulator) -> None:
    """Every amount the ledger writes has at most 20 integer digits and 18 decimals."""
    ledger = sim.dataset.ledger
    ledger.current()
    texts = [
        *ledger.fills.written(range(len(ledger.fills))),
        *ledger.orders.written(range(len(ledger.orders))),
        *ledger.events.records,
        *ledger.closed.records,
        *ledger.conversions.records,
    ]
    for record in texts:
        assert record is not None
        for value in orjson.loads(record).values():
            if isinstance(value, str) and value.replace(".", "").lstrip("-").isdigit():
                whole, _, decimals = value.lstrip("-").partition(".")
                assert len(whole) <= 20, value
                assert len(decimals) <= 18, value


def test_the_same_seed_answers_the_same_bytes() -> None:
    def start(seed: int) -> Simulator:
        return Simulator(seed=seed, scale=Scale.small(), clock=SimClock(EPOCH + DAY + 5))

    with start(11) as a, start(11) as b, start(12) as c:
        for role in ("partner", "sub_1"):
            first = _bodies(a, a.credentials_for(role))
            assert first == _bodies(b, b.credentials_for(role))
            assert first != _bodies(c, c.credentials_for(role))


def test_every_account_and_region_has_its_own_ledger() -> None:
    clock = SimClock(EPOCH + DAY)
    with (
        Simulator(seed=7, scale=Scale.small(), clock=clock, subaccounts=2) as world,
        Simulator(seed=7, scale=Scale.small(), clock=clock, region="eu", subaccounts=2) as eu,
    ):
        seen = set()
        for sim in (world, eu):
            for role in ("partner", "sub_1", "sub_2"):
                body = orjson.dumps(
                    [ok(sim, op, p, sim.credentials_for(role)) for op, p in HISTORIES[:2]]
                )
                seen.add(body)
        assert len(seen) == 6


@pytest.fixture(scope="module")
def advancing() -> Iterator[tuple[Simulator, list[bytes]]]:
    """A simulator whose clock moves 3 days on, and what it answered before."""
    with Simulator(seed=7, scale=Scale.small(), clock=SimClock(EPOCH)) as sim:
        windows = _windows(sim)
        sim.clock.advance(3 * DAY + 11)
        yield sim, windows


def _windows(sim: Simulator) -> list[bytes]:
    """Past windows: what a night of the epoch's eve reads."""
    day = {"startDate": EPOCH - 2 * DAY, "endDate": EPOCH - DAY}
    creds = sim.credentials
    return [
        post(sim.url, op.path, params, creds).content
        for op, params in (
            (spec.EXECUTED_HISTORY, {**day, "limit": 500}),
            (spec.ORDER_HISTORY, {**day, "limit": 500}),
            (spec.POSITIONS_HISTORY, {**day, "limit": 100}),
            (spec.CLOSED_PNL, {**day, "limit": 100}),
            (spec.CONVERT_HISTORY, {"from": day["startDate"], "to": day["endDate"]}),
        )
    ]


def test_a_past_window_answers_the_same_later(advancing: tuple[Simulator, list[bytes]]) -> None:
    sim, before = advancing
    assert _windows(sim) == before


@pytest.mark.parametrize(
    ("op", "key"),
    [
        (spec.EXECUTED_HISTORY, "id"),
        (spec.POSITIONS_HISTORY, "modifyDate"),
        (spec.CLOSED_PNL, "positionId"),
        (spec.MAIN_ACCOUNT_HISTORY, "transactionId"),
    ],
)
def test_new_records_only_at_the_head(
    advancing: tuple[Simulator, list[bytes]], op: spec.Operation, key: str
) -> None:
    sim, _ = advancing
    with Simulator(seed=7, scale=Scale.small(), clock=SimClock(EPOCH)) as then:
        old = every(then, op, {}, then.credentials)
    new = every(sim, op, {}, sim.credentials)
    if op is spec.EXECUTED_HISTORY:  # grouped by market page by page: newest first again
        old, new = (sorted(r, key=lambda f: (f["time"], f["id"]), reverse=True) for r in (old, new))
    fresh = len(new) - len(old)
    assert fresh > 0
    assert [r[key] for r in new[fresh:]] == [r[key] for r in old]


def test_the_ledger_of_a_dataset_is_the_simulators() -> None:
    """Tests and benchmarks build a `Dataset` from the seed: its ledger is what is served."""
    clock = SimClock(EPOCH + 2 * DAY)
    with Simulator(seed=7, scale=Scale.small(), clock=clock, subaccounts=0) as sim:
        direct = Dataset(7, Scale.small(), clock)
        assert ok(sim, spec.MAIN_BALANCE, {}, sim.credentials) == direct.main_balance
        direct.ledger.current()
        fills = every(sim, spec.EXECUTED_HISTORY, {"market": "BTC_USDT"}, sim.credentials)
        view = direct.ledger.fills.view(market="BTC_USDT")
        assert view is not None
        assert fills == direct.ledger.fills.parsed(view[::-1])
