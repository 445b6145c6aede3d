"""The data: deterministic from the seed, the scale and a fixed epoch, growing at its head with
the clock, large enough to bite."""

from __future__ import annotations

from decimal import Decimal, localcontext

import pytest

from pipeline import spec
from pipeline.simulator import EPOCH, Dataset, Scale, SimClock, Simulator
from pipeline.simulator._assets import CURRENCIES
from tests.support.signing import post
from tests.support.simulated import FROZEN_AT

FUNDING = spec.FUNDING_HISTORY.path
DAY_S = 86_400


def _bodies(sim: Simulator) -> list[bytes]:
    requests = [
        (FUNDING, {"offset": 300, "limit": 100}),
        (spec.INVESTMENTS_HISTORY.path, {"offset": 100}),
        (spec.MAIN_BALANCE.path, {}),
        (spec.TRADING_BALANCE.path, {}),
        (spec.WATCHER_LINKS.path, {"account": "demo-miner"}),
    ]
    return [post(sim.url, path, params, sim.credentials).content for path, params in requests]


def test_same_seed_and_clock_give_the_same_bytes() -> None:
    with (
        Simulator(seed=11, clock=SimClock(FROZEN_AT)) as a,
        Simulator(seed=11, clock=SimClock(FROZEN_AT)) as b,
    ):
        assert a.credentials == b.credentials
        assert _bodies(a) == _bodies(b)
        with Simulator(seed=12, clock=SimClock(FROZEN_AT)) as c:
            assert _bodies(c) != _bodies(a)


def test_new_funding_entries_appear_at_the_head(own_sim: Simulator) -> None:
    before = post(own_sim.url, FUNDING, {"limit": 100}, own_sim.credentials).json()["records"]
    own_sim.clock.advance(8 * 3600)
    after = post(own_sim.url, FUNDING, {"limit": 100}, own_sim.credentials).json()["records"]
    newest = int(before[0]["fundingTime"])
    fresh = [r for r in after if int(r["fundingTime"]) > newest]
    markets = len(own_sim.dataset.funding.market_names)
    assert len(fresh) == markets + 1  # every market, and the hedged one twice
    assert {int(r["fundingTime"]) for r in fresh} == {newest + 8 * 3600}
    # What was at the head moved down by exactly that many places.
    assert after[len(fresh) :] == before[: 100 - len(fresh)]


def _day(data: Dataset, day_start: int) -> list[dict[str, str]]:
    return [
        e
        for e in data.funding.newest_first()
        if day_start <= int(e["fundingTime"]) < day_start + DAY_S
    ]


@pytest.mark.parametrize("later_days", [1, 30, 400])
def test_a_day_answers_the_same_entries_on_every_later_day(later_days: int) -> None:
    """What the clock has passed stays as it was: the hedge switch and the links are fixed at the
    epoch, an investment changes once, when it ends, so a rerun of any day loads what the first
    run loaded."""
    scale = Scale.small()
    days = range(EPOCH // DAY_S - scale.days, EPOCH // DAY_S + 3)  # the hedge switch among them
    then = Dataset(5, scale, SimClock(EPOCH + 3 * DAY_S))
    later = Dataset(5, scale, SimClock(EPOCH + (3 + later_days) * DAY_S))
    for day in days:
        assert _day(later, day * DAY_S) == _day(then, day * DAY_S), day
    assert later.funding.hedge_since_round == then.funding.hedge_since_round
    earlier = {r["id"]: r for r in then.investments.all()}
    ended = 0
    for after in later.investments.all():
        before = earlier.pop(after["id"], None)
        if before is None:  # a renewal made since
            assert then.clock.now() < after["created"] <= later.clock.now()
        elif before != after:
            assert (before["status"], after["status"]) == (1, 2), before["id"]
            assert then.clock.now() < after["paymentTime"] <= later.clock.now()
            ended += 1
    assert earlier == {}
    assert ended or later_days == 1  # seven-day plans end within 30 days
    assert later.watcher_links == then.watcher_links
    assert len(later.funding) > len(then.funding)  # only the head grew


@pytest.mark.parametrize("renewed", [False, True], ids=["ends", "ends-renewed"])
def test_an_investment_ends_into_the_main_balance_at_its_payment_time(renewed: bool) -> None:
    """At its payment time an active investment closes, last updated then, its whole term's
    interest paid, and its principal and the interest it had not paid are in the main balance
    from that microsecond on, exactly. One in a plan open to new money is renewed at that
    instant: the same amount taken from the main balance into the same plan, for a term."""
    scale = Scale.small()
    at_epoch = Dataset(5, scale, SimClock(EPOCH)).investments.all()
    first = min(
        (r for r in at_epoch if r["status"] == 1 and (r["plan"]["status"] == 1) == renewed),
        key=lambda r: r["paymentTime"],
    )
    end, plan = first["paymentTime"], first["plan"]
    before = Dataset(5, scale, SimClock(end - 0.000_001))
    after = Dataset(5, scale, SimClock(end))
    (then,) = [r for r in before.investments.all() if r["id"] == first["id"]]
    (now,) = [r for r in after.investments.all() if r["id"] == first["id"]]
    assert then == first
    assert now == first | {"status": 2, "updated": end, "interestPaid": now["interestPaid"]}
    paid, whole = Decimal(first["interestPaid"]), Decimal(now["interestPaid"])
    # The whole term's interest, pro rata at the plan's yearly percent, cut to its places.
    year = Decimal(100 * 365 * DAY_S)
    exact = (
        Decimal(first["amount"]) * Decimal(plan["percent"]) * Decimal(plan["interestRatio"])
        * plan["duration"] * 60 / year
    )  # fmt: skip
    places = CURRENCIES[plan["interestTicker"]][2]
    assert paid < whole <= exact < whole + Decimal(1).scaleb(-places)
    made = [r for r in after.investments.all() if r["created"] == end]
    if renewed:
        (renewal,) = made
        term = plan["duration"] * 60
        assert renewal["id"] != first["id"]
        assert renewal == first | {
            "id": renewal["id"], "created": end, "updated": end, "paymentTime": end + term,
            "interestPaid": "0",
        }  # fmt: skip
    else:
        assert made == []
    expected = {plan["ticker"]: Decimal(0), plan["interestTicker"]: Decimal(0)}
    expected[plan["ticker"]] += 0 if renewed else Decimal(first["amount"])
    expected[plan["interestTicker"]] += whole - paid
    with localcontext(prec=60):  # a balance has up to 31 digits: no rounding
        moved = {
            ticker: Decimal(after.main_balance[ticker]["main_balance"])
            - Decimal(before.main_balance[ticker]["main_balance"])
            for ticker in expected
        }
    assert moved == expected


def test_investments_stay_active_on_any_day_and_none_past_its_term() -> None:
    """Years after the epoch the account still holds active investments (those of the open
    plans, renewed), none of them active past its payment time, and every closed one was
    paid its whole term's interest."""
    scale = Scale.small()
    for years in (1, 5):
        moment = EPOCH + years * 365 * DAY_S
        records = Dataset(5, scale, SimClock(moment)).investments.all()
        active = [r for r in records if r["status"] == 1]
        assert active, years
        assert all(r["created"] <= moment < r["paymentTime"] for r in active)
        assert all(r["plan"]["status"] == 1 for r in active)
        assert len({r["id"] for r in records}) == len(records)


def test_a_running_clock_moves_with_time() -> None:
    clock = SimClock.running()
    assert clock.now() <= SimClock.running().now()


def test_scale_parsing() -> None:
    assert Scale.parse("markets=3,days=2,investments=10") == Scale(3, 2, 10, 4)
    for bad in ("huge", "markets=x", "planets=3"):
        with pytest.raises(ValueError, match=bad.split("=")[0]):
            Scale.parse(bad)


def test_explicit_sizes() -> None:
    data = Dataset(1, Scale.parse("markets=3,days=2,investments=10,tickers=2"), SimClock(FROZEN_AT))
    assert len(data.funding.market_names) == 3
    assert len(data.funding) == 3 * 2 * 3 + (6 - 3)  # hedge pairs in the second half
    assert len(data.investments.all()) == 10


def test_large_scale_offset_window(large_sim: Simulator) -> None:
    data = large_sim.dataset.investments
    assert data.count(status=1) > 10_100
    assert all(data.count(status=s, ticker=t) <= 10_100 for s in (1, 2) for t in data.tickers)
    path, creds = spec.INVESTMENTS_HISTORY.path, large_sim.credentials
    last = post(large_sim.url, path, {"status": 1, "offset": 10_000, "limit": 100}, creds)
    assert last.status_code == 200
    assert len(last.json()["records"]) == 100
    beyond = post(large_sim.url, path, {"status": 1, "offset": 10_001, "limit": 100}, creds)
    assert beyond.status_code == 400
    assert list(beyond.json()["errors"]) == ["offset"]


def test_large_scale_holds_a_million_funding_entries(large_sim: Simulator) -> None:
    assert len(large_sim.dataset.funding) >= 1_000_000
    page = post(large_sim.url, FUNDING, {"offset": 999_900, "limit": 100}, large_sim.credentials)
    assert len(page.json()["records"]) == 100
