"""Rate budgets: per key and per address, rejected by the gateway with a non-JSON 429."""

from __future__ import annotations

import httpx

from pipeline import spec
from pipeline.simulator import Simulator
from tests.support.signing import post


def test_budgets_come_from_the_spec(own_sim: Simulator) -> None:
    for op in spec.OPERATIONS:
        assert own_sim.limits.budget(op.budget.group) == op.budget


def test_beyond_the_budget_the_gateway_answers_429_without_json(own_sim: Simulator) -> None:
    own_sim.limits.set_budget("main-account", 5, 60)
    statuses = [
        post(own_sim.url, spec.MAIN_BALANCE.path, {}, own_sim.credentials).status_code
        for _ in range(7)
    ]
    assert statuses == [200] * 5 + [429] * 2
    r = post(own_sim.url, spec.MAIN_BALANCE.path, {}, own_sim.credentials)
    assert r.status_code == 429
    assert "retry-after" not in r.headers
    assert r.headers["content-type"].startswith("text/html")
    # Investments share the main-account budget; other groups are untouched.
    assert (
        post(own_sim.url, spec.INVESTMENTS_HISTORY.path, {}, own_sim.credentials).status_code == 429
    )
    assert post(own_sim.url, spec.HEDGE_MODE.path, {}, own_sim.credentials).status_code == 200


def test_the_budget_is_per_address_too(own_sim: Simulator) -> None:
    own_sim.limits.set_budget("main-account", 4, 60)
    keys = [own_sim.credentials, own_sim.credentials_for("no_b2b")]
    statuses = [
        post(own_sim.url, spec.MAIN_BALANCE.path, {}, keys[i % 2]).status_code for i in range(6)
    ]
    # Two keys, one address: the address's budget of 4 is spent across both keys.
    assert statuses == [200] * 4 + [429] * 2


def test_public_budget(own_sim: Simulator) -> None:
    own_sim.limits.set_budget("public", 3, 60)
    statuses = [httpx.get(own_sim.url + spec.PING.path).status_code for _ in range(5)]
    assert statuses == [200, 200, 200, 429, 429]


def test_the_window_slides(own_sim: Simulator) -> None:
    """A request counts for exactly the window's length after it: the limiter's clock is moved,
    not waited for."""
    now = [1_000.0]
    own_sim.limits.clock = lambda: now[0]
    own_sim.limits.set_budget("hedge-mode", 3, 10.0)

    def status() -> int:
        return post(own_sim.url, spec.HEDGE_MODE.path, {}, own_sim.credentials).status_code

    counted = []
    for _ in range(3):
        counted.append(status())
        now[0] += 1.0
    assert counted == [200, 200, 200]
    # Counted at 1,000, 1,001 and 1,002: all three are in the window until the first leaves it.
    now[0] = 1_009.5
    assert status() == 429
    now[0] = 1_010.0
    assert [status(), status()] == [200, 429]


def test_budgets_can_be_switched_off(own_sim: Simulator) -> None:
    own_sim.limits.set_budget("public", 1, 60)
    own_sim.limits.enabled = False
    assert {httpx.get(own_sim.url + spec.PING.path).status_code for _ in range(5)} == {200}


def test_an_endpoint_budget_is_spent_inside_its_groups(own_sim: Simulator) -> None:
    """The deposit and withdrawal history has 200 of its own within main-account's 1000: both
    must have room, and a request either refuses counts against neither."""
    history = spec.MAIN_ACCOUNT_HISTORY
    assert history.endpoint_budget == spec.RateBudget("main-account-history", 200)
    assert own_sim.limits.budget("main-account-history") == history.endpoint_budget
    own_sim.limits.set_budget("main-account-history", 3, 60)
    own_sim.limits.set_budget("main-account", 5, 60)
    creds = own_sim.credentials
    statuses = [post(own_sim.url, history.path, {}, creds).status_code for _ in range(4)]
    assert statuses == [200, 200, 200, 429]
    # The group has 2 left: the main balance takes them, then the group is spent too.
    balance = [post(own_sim.url, spec.MAIN_BALANCE.path, {}, creds).status_code for _ in range(3)]
    assert balance == [200, 200, 429]


def test_the_trade_endpoints_share_the_trade_account_budget(own_sim: Simulator) -> None:
    own_sim.limits.set_budget("trade-account", 4, 60)
    creds = own_sim.credentials
    statuses = [
        post(own_sim.url, op.path, params, creds).status_code
        for op, params in (
            (spec.TRADING_BALANCE, {}),
            (spec.EXECUTED_HISTORY, {"limit": 1}),
            (spec.ORDER_HISTORY, {"limit": 1}),
            (spec.ORDER_DEALS, {"orderId": 1}),
            (spec.EXECUTED_HISTORY, {"limit": 1}),
        )
    ]
    assert statuses == [200, 200, 200, 200, 429]
    # The convert service and the collateral account budget on their own.
    assert post(own_sim.url, spec.CONVERT_HISTORY.path, {}, creds).status_code == 200
    assert post(own_sim.url, spec.OPEN_POSITIONS.path, {}, creds).status_code == 200
