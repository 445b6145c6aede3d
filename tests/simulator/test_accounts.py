"""Several accounts at once: the main account and its sub-accounts, each key answered from its
own account's data; and the two regions, each a service with its own keys and data."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from pipeline import spec
from pipeline.simulator import Credentials, Dataset, Scale, SimClock, Simulator, spawn
from tests.support.signing import post
from tests.support.simulated import FROZEN_AT

FUNDING = spec.FUNDING_HISTORY.path
MAIN = spec.MAIN_BALANCE.path
SCALE = Scale.small()


def _ok(sim: Any, path: str, creds: Credentials, params: dict[str, Any] | None = None) -> Any:
    r = post(sim.url, path, params or {}, creds)
    assert r.status_code == 200, r.text
    return r.json()


def _view(sim: Any, creds: Credentials) -> list[Any]:
    """What one key sees of its account: funding, balances, hedge mode, investments."""
    return [
        _ok(sim, FUNDING, creds, {"limit": 100})["records"],
        _ok(sim, MAIN, creds),
        _ok(sim, spec.TRADING_BALANCE.path, creds),
        _ok(sim, spec.HEDGE_MODE.path, creds),
        _ok(sim, spec.INVESTMENTS_HISTORY.path, creds, {"limit": 100})["records"]
        if creds == sim.credentials
        else None,  # sub-account keys have no B2B access
    ]


@pytest.fixture(scope="module")
def five() -> Iterator[Simulator]:
    """The main account and four sub-accounts: five accounts in all (read only)."""
    with Simulator(seed=7, scale=SCALE, clock=SimClock(FROZEN_AT), subaccounts=4) as s:
        yield s


def test_roles_list_the_main_keys_then_each_sub_account(five: Simulator) -> None:
    assert five.roles == ["partner", "no_b2b", "read_only", "disabled"] + [
        f"sub_{n}" for n in range(1, 5)
    ]
    assert five.subaccount_roles == ["sub_1", "sub_2", "sub_3", "sub_4"]
    # Keys of one account share its data; each sub-account is an account of its own.
    assert five.dataset_for("no_b2b") is five.dataset_for("partner") is five.dataset
    datasets = {id(five.dataset_for(role)) for role in five.subaccount_roles}
    assert len(datasets) == 4
    assert id(five.dataset) not in datasets


def test_sub_accounts_answer_their_own_funding_and_balances(five: Simulator) -> None:
    main = _ok(five, MAIN, five.credentials)
    funding = _ok(five, FUNDING, five.credentials, {"limit": 100})["records"]
    seen = [(orjson.dumps(main), orjson.dumps(funding))]
    for role in five.subaccount_roles:
        creds = five.credentials_for(role)
        data = five.dataset_for(role)
        balance = _ok(five, MAIN, creds)
        records = _ok(five, FUNDING, creds, {"limit": 100})["records"]
        assert balance == data.main_balance
        assert records == data.funding.newest_first()[:100]
        seen.append((orjson.dumps(balance), orjson.dumps(records)))
    # Five accounts, five balances and five funding histories, none the same as another.
    assert len({b for b, _ in seen}) == len({f for _, f in seen}) == 5


def test_hedge_mode_and_markets_differ_between_accounts(five: Simulator) -> None:
    modes = {
        role: _ok(five, spec.HEDGE_MODE.path, five.credentials_for(role))["hedgeMode"]
        for role in ("partner", "sub_1", "sub_2")
    }
    assert modes == {"partner": True, "sub_1": False, "sub_2": True}
    markets = {role: five.dataset_for(role).funding.market_names for role in five.roles}
    assert len(set(markets.values())) > 1
    # A hedge-mode-off account has one entry per market and funding time.
    one_way = five.dataset_for("sub_1").funding.newest_first()
    assert len({(r["market"], r["fundingTime"]) for r in one_way}) == len(one_way)


def test_each_account_validates_against_its_own_data(five: Simulator) -> None:
    main, sub = five.credentials, five.credentials_for("sub_1")
    only_main = sorted(
        five.dataset.funding.market_names - five.dataset_for("sub_1").funding.market_names
    )
    assert only_main, "the main account trades a market sub_1 does not"
    assert post(five.url, FUNDING, {"market": only_main[0]}, main).status_code == 200
    refused = post(five.url, FUNDING, {"market": only_main[0]}, sub)
    assert refused.status_code == spec.FUNDING_HISTORY.validation.status
    assert refused.json()["errors"] == {"market": ["The selected market is invalid."]}
    # Mining accounts carry the sub-account's name, and only its own key sees them.
    assert five.dataset_for("sub_1").mining_accounts == ("sub1-miner", "sub1-miner-eu")
    links = _ok(five, spec.WATCHER_LINKS.path, sub, {"account": "sub1-miner"})["data"]
    assert links == five.dataset_for("sub_1").watcher_links["sub1-miner"]
    assert (
        post(five.url, spec.WATCHER_LINKS.path, {"account": "sub1-miner"}, main).status_code == 400
    )
    assert (
        post(five.url, spec.WATCHER_LINKS.path, {"account": "demo-miner"}, sub).status_code == 400
    )


def test_accounts_are_the_same_in_every_simulator_of_the_seed() -> None:
    def start() -> Simulator:
        return Simulator(seed=11, scale=SCALE, clock=SimClock(FROZEN_AT), subaccounts=3)

    with start() as a, start() as b:
        for role in ("partner", "sub_1", "sub_2", "sub_3"):
            assert a.credentials_for(role) == b.credentials_for(role)
            assert _view(a, a.credentials_for(role)) == _view(b, b.credentials_for(role))


def test_the_global_main_account_keeps_the_data_the_seed_gives() -> None:
    """Tests and benchmarks build a `Dataset` from the seed and compare: it is what is served."""
    with Simulator(seed=7, scale=SCALE, clock=SimClock(FROZEN_AT), subaccounts=4) as sim:
        direct = Dataset(7, SCALE, SimClock(FROZEN_AT))
        creds = sim.credentials
        assert (
            _ok(sim, FUNDING, creds, {"limit": 100})["records"]
            == (direct.funding.newest_first()[:100])
        )
        assert sim.dataset.funding.newest_first() == direct.funding.newest_first()
        assert sim.dataset.investments.all() == direct.investments.all()
        assert _ok(sim, MAIN, creds) == direct.main_balance
        assert _ok(sim, spec.HEDGE_MODE.path, creds) == {"hedgeMode": direct.hedge_mode}
        account = direct.mining_accounts[0]
        links = _ok(sim, spec.WATCHER_LINKS.path, creds, {"account": account})["data"]
        assert links == direct.watcher_links[account]


def test_a_sub_account_is_built_when_first_asked_for(own_sim: Simulator) -> None:
    assert own_sim.accounts.built == ["main"]
    post(own_sim.url, MAIN, {}, own_sim.credentials_for("sub_2"))
    assert own_sim.accounts.built == ["main", "sub_2"]


def test_an_eu_simulator_has_keys_and_data_of_its_own() -> None:
    clock = SimClock(FROZEN_AT)
    with (
        Simulator(seed=7, scale=SCALE, clock=clock) as world,
        Simulator(seed=7, scale=SCALE, clock=clock, region="eu") as eu,
    ):
        for role in world.roles:
            assert world.credentials_for(role).api_key != eu.credentials_for(role).api_key
        # A key of one region is unknown to the other: the usual 401.
        for sim, creds in ((eu, world.credentials), (world, eu.credentials)):
            r = post(sim.url, MAIN, {}, creds)
            assert (r.status_code, r.json()["code"]) == (401, 10)
        assert post(eu.url, MAIN, {}, world.credentials_for("sub_1")).status_code == 401
        # Its own keys are served, from data of its own.
        for role in ("partner", "sub_1"):
            assert _view(eu, eu.credentials_for(role)) != _view(world, world.credentials_for(role))
        assert _ok(eu, MAIN, eu.credentials) == eu.dataset.main_balance
        account = eu.dataset.mining_accounts[0]
        links = _ok(eu, spec.WATCHER_LINKS.path, eu.credentials, {"account": account})["data"]
        assert all(link["link"].startswith(spec.EU_BASE_URL + "/") for link in links)


def test_the_regions_are_checked() -> None:
    with pytest.raises(ValueError, match="region"):
        Simulator(region="us")


def test_one_address_budget_is_spent_by_every_account(own_sim: Simulator) -> None:
    own_sim.limits.set_budget("main-account", 4, 60)
    keys = [own_sim.credentials, own_sim.credentials_for("sub_1"), own_sim.credentials_for("sub_2")]
    statuses = [post(own_sim.url, MAIN, {}, keys[i % 3]).status_code for i in range(6)]
    # Three accounts, one address: its budget of 4 is spent across them all.
    assert statuses == [200] * 4 + [429] * 2


def test_the_main_partner_key_resets_any_sub_account_key() -> None:
    """The reset changes a secret: done on a simulator of the test's own."""
    with Simulator(seed=7, scale=SCALE, clock=SimClock(FROZEN_AT), subaccounts=4) as sim:
        target = sim.keys["sub_4"]
        before = sim.credentials_for("sub_4")
        reset = spec.RESET_SUBACCOUNT_KEY.path
        refused = post(sim.url, reset, {"apiKeyId": target.key_id}, sim.credentials_for("sub_3"))
        assert (refused.status_code, refused.json()["code"]) == (403, 4)
        done = post(sim.url, reset, {"apiKeyId": target.key_id}, sim.credentials)
        assert (done.status_code, done.json()) == (200, {})
        after = sim.credentials_for("sub_4")
        assert after.api_key == before.api_key
        assert after.api_secret != before.api_secret
        assert post(sim.url, MAIN, {}, before).status_code == 401
        assert _ok(sim, MAIN, after) == sim.dataset_for("sub_4").main_balance


@pytest.mark.parametrize("region", ["global", "eu"])
def test_a_spawned_simulator_prints_every_sub_account_key(region: str) -> None:
    scale = "markets=2,days=3,investments=20"
    with spawn(seed=7, scale=scale, frozen_at=FROZEN_AT, subaccounts=4, region=region) as sim:
        assert sim.roles == ["partner", "sub_1", "sub_2", "sub_3", "sub_4"]
        same = Simulator(
            seed=7,
            scale=Scale.parse(scale),
            clock=SimClock(FROZEN_AT),  # balances are the ledger's at the clock's present
            subaccounts=4,
            region=region,
        )
        balances = []
        for role in sim.roles:
            creds = sim.credentials_for(role)
            assert creds == same.credentials_for(role)
            balance = _ok(sim, MAIN, creds)
            assert balance == same.dataset_for(role).main_balance
            balances.append(orjson.dumps(balance))
        assert len(set(balances)) == 5
        with pytest.raises(KeyError, match="no_b2b"):
            sim.credentials_for("no_b2b")
