"""Every operation of the spec through the client, against the simulator over loopback."""

from __future__ import annotations

import asyncio
import typing

import pytest

from pipeline import spec
from pipeline.simulator import Simulator
from pipeline.whitebit import (
    AsyncWhiteBIT,
    Credentials,
    FixedPlan,
    FundingEntry,
    HedgeMode,
    Investment,
    MainBalance,
    Pacer,
    TradingBalance,
    WatcherLink,
)
from tests.support.client import Watching, client, collect


def test_every_operation(sim: Simulator) -> None:
    data = sim.dataset

    async def main() -> None:
        async with client(sim) as c:
            await c.ping()
            assert await c.hedge_mode() == {"hedgeMode": data.hedge_mode}
            assert await c.main_balance() == data.main_balance
            assert await c.main_balance(ticker="NOPE") == {"NOPE": {"main_balance": "0"}}
            trading = await c.trading_balance()
            assert trading == {
                t: b
                for t, b in data.trading_balance.items()
                if b != {"available": "0", "freeze": "0"}
            }
            assert set(await c.trading_balance(ticker="BTC")) == {"BTC"}
            account = data.mining_accounts[0]
            assert await c.watcher_links(account) == data.watcher_links[account]
            funding = await c.funding_history(limit=7, offset=3)
            assert (funding["offset"], funding["limit"]) == (3, 7)
            assert funding["records"] == data.funding.newest_first()[3:10]
            market = sorted(data.funding.market_names)[0]
            one_market = await c.funding_history(market=market, limit=5)
            assert one_market["records"] == data.funding.newest_first(market)[:5]
            page = await c.investments_history(status=2, limit=10, offset=5)
            closed = [r for r in data.investments.all() if r["status"] == 2]
            assert page["records"] == closed[5:15]
            first = data.investments.all()[0]
            assert (await c.investments_history(investment_id=first["id"]))["records"] == [first]

    asyncio.run(main())


def test_reset_subaccount_key(own_sim: Simulator) -> None:
    target = own_sim.keys["sub_1"]
    old = target.secret

    async def main() -> None:
        async with client(own_sim) as c:
            await c.reset_subaccount_key(target.key_id)

    asyncio.run(main())
    assert target.resets == 1
    assert target.secret != old


def test_public_ping_needs_no_credentials(sim: Simulator) -> None:
    async def main() -> None:
        async with AsyncWhiteBIT(base_url=sim.url, pacing=False) as c:
            await c.ping()
            with pytest.raises(ValueError, match="needs credentials"):
                await c.hedge_mode()

    asyncio.run(main())


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda c: c.funding_history(limit=101), "limit must be at most 100"),
        (lambda c: c.funding_history(offset=-1), "offset must be at least 0"),
        (lambda c: c.funding_history(market="BTC_USDT"), "market must match"),
        (lambda c: c.investments_history(offset=10_001), "offset must be at most 10000"),
        (lambda c: c.investments_history(status=3), "status must be one of"),
        (lambda c: c.investments_history(limit=True), "limit must be an integer"),
        (lambda c: c.watcher_links("a" * 256), "account must be at most 255"),
        (lambda c: c.reset_subaccount_key("123"), "apiKeyId must match"),
    ],
)
def test_parameters_are_checked_against_the_spec_before_sending(
    sim: Simulator, call: typing.Any, message: str
) -> None:
    watch = Watching()

    async def main() -> None:
        async with client(sim, transport=watch) as c:
            with pytest.raises(ValueError, match=message):
                await call(c)
            await c.ping()

    asyncio.run(main())
    # Only the ping went out: the refused call sent nothing.
    assert [r.url.path for r in watch.sent] == [spec.PING.path]


@pytest.mark.parametrize(
    ("host", "bound"),
    [
        ("127.0.0.1", "127.0.0.1"),
        ("127.5.6.7", "127.5.6.7"),
        ("localhost", "127.0.0.1"),
        ("[::1]", "::1"),
    ],
)
def test_plain_http_is_accepted_on_loopback(host: str, bound: str) -> None:
    """A simulator on each loopback address, and the client asked to reach it over plain http:
    the client takes the address, and its request goes there and is answered."""
    watch = Watching()
    with Simulator(host=bound) as sim:
        url = f"http://{host}:{sim.url.rsplit(':', 1)[1]}"

        async def main() -> None:
            async with AsyncWhiteBIT(base_url=url, pacing=False, transport=watch) as c:
                assert c.base_url == url
                await c.ping()  # raises unless the simulator answers ["pong"]

        asyncio.run(main())
    assert [str(request.url) for request in watch.sent] == [url + spec.PING.path]


@pytest.mark.parametrize(
    "url", ["http://whitebit.com", "http://10.0.0.1", "http://localhost.example.com", "ftp://x"]
)
def test_plain_http_elsewhere_is_refused(url: str) -> None:
    with pytest.raises(ValueError, match=r"https://"):
        AsyncWhiteBIT(base_url=url)


def test_the_default_address_is_the_global_exchange() -> None:
    assert AsyncWhiteBIT().base_url == spec.GLOBAL_BASE_URL


def test_clients_of_one_address_share_one_pacer() -> None:
    async def main() -> None:
        assert Pacer.shared("https://a") is Pacer.shared("https://a")
        assert Pacer.shared("https://a") is not Pacer.shared("https://b")

    asyncio.run(main())


def test_nothing_shows_the_secret() -> None:
    secret = "s3cr3t-" * 5
    c = Credentials("key-1234567890", secret)
    assert secret not in repr(c)
    assert secret not in str(c)
    assert "key-1234567890" not in repr(c)  # the key is shortened too
    client_ = AsyncWhiteBIT(c)
    assert secret not in repr(client_)
    assert "key-" in repr(client_)  # the credentials are shown, shortened
    asyncio.run(client_.aclose())


@pytest.mark.parametrize(
    ("typed", "fields"),
    [
        (FixedPlan, spec.FIXED_PLAN_FIELDS),
        (Investment, spec.INVESTMENT_FIELDS),
        (FundingEntry, spec.FUNDING_ENTRY_FIELDS),
        (MainBalance, spec.MAIN_BALANCE_FIELDS),
        (TradingBalance, spec.TRADING_BALANCE_FIELDS),
        (WatcherLink, spec.WATCHER_LINK_FIELDS),
        (HedgeMode, spec.HEDGE_MODE_FIELDS),
    ],
)
def test_static_record_types_name_the_spec_fields(typed: type, fields: tuple[spec.Field]) -> None:
    assert list(typing.get_type_hints(typed)) == [f.name for f in fields]


def test_walks_run_once(sim: Simulator) -> None:
    async def main() -> None:
        async with client(sim) as c:
            walk = c.walk(spec.FUNDING)
            await collect(walk)
            with pytest.raises(RuntimeError, match="runs once"):
                await collect(walk)

    asyncio.run(main())
