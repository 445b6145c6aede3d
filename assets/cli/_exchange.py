"""``ping`` and ``reset-key``: an account's exchange, asked directly (not through a run).

``reset-key`` is the API's one write: it is offered here, deliberately, and by no schedule.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Final, TypeVar

import click
from rich.console import Console

from pipeline import spec
from pipeline.whitebit import AsyncWhiteBIT, NotFoundError, RetryPolicy, WhiteBITError

from ._common import chosen, clock, console, settings

if TYPE_CHECKING:
    from assets.resources import Exchange

T = TypeVar("T")
log = logging.getLogger("assets.cli")
# The embedded simulator's warning is said once, on the console; not again through the log.
log.addHandler(logging.NullHandler())
log.propagate = False

#: A ping asks whether the exchange answers now: a few quick tries (about a second of waits in
#: all), each given a few seconds, where a run's policy outlasts an outage of minutes.
PING_RETRY: Final = RetryPolicy(max_retries=2, initial_delay_s=0.25, max_delay_s=0.5)
PING_TIMEOUT_S: Final = 3.0


def _against_exchange(
    out: Console,
    account: str | None,
    act: Callable[[AsyncWhiteBIT, Exchange], Awaitable[T]],
    *,
    brief: bool = False,
) -> tuple[T, Exchange]:
    """Run ``act`` with a client of an account's exchange (default: the first account's);
    ``brief``: tried as `PING_RETRY` and `PING_TIMEOUT_S` say, not as a run is."""
    from assets.definitions import whitebit_resource

    (first, *_) = chosen((account,) if account else ())
    # Outside a Dagster run, EnvVar fields hold names: resolve them as a run would.
    resource = whitebit_resource(first, settings()).process_config_and_initialize()
    if resource.simulated:
        out.print("[yellow]No credentials set: using the embedded WhiteBIT simulator.[/yellow]")
    with resource.exchange(log, simulator_day=clock().today()) as exchange:

        async def run() -> T:
            client = (
                AsyncWhiteBIT(
                    exchange.credentials,
                    base_url=exchange.base_url,
                    retry=PING_RETRY,
                    timeout=PING_TIMEOUT_S,
                    local=clock(),
                )
                if brief
                else exchange.client(clock())
            )
            async with client:
                return await act(client, exchange)

        try:
            return asyncio.run(run()), exchange
        except WhiteBITError as exc:
            tried = (
                f"; a ping tries {PING_RETRY.max_retries + 1} times within seconds, a run for "
                "minutes"
                if brief
                else ""
            )
            raise click.ClickException(f"{exc}{tried}") from None


@click.command()
@click.option("--account", help="The account whose exchange to ping; default: the first.")
def ping(account: str | None) -> None:
    """Check that an account's exchange answers its public ping, and how fast."""
    out = console()

    async def act(client: AsyncWhiteBIT, exchange: Exchange) -> float:
        started = time.perf_counter()
        await client.ping()
        return time.perf_counter() - started

    seconds, exchange = _against_exchange(out, account, act, brief=True)
    out.print(f"pong from {exchange.base_url} in {seconds * 1000:.1f} ms")


#: Where a sub-account key's id is found: nothing this command writes shows it.
KEY_IDS: Final = (
    "a sub-account key's id is the id the exchange lists for each of the sub-account's keys: "
    "POST /api/v4/sub-account/api-key/list with the sub-account's subAccountId (WhiteBIT's API "
    "documentation, sub-account API keys; the ids of the main account's sub-accounts are in "
    'the warehouse: whitebit-etl sql "SELECT alias, subaccount_id FROM subaccounts")'
)


def _uuid(ctx: click.Context, param: click.Parameter, value: str | None) -> str:
    if value is None:
        raise click.BadParameter(f"none given; {KEY_IDS}")
    if not spec.UUID_PATTERN.match(value):
        raise click.BadParameter(
            f"{value!r} is not a UUID (like 3fa85f64-5717-4562-b3fc-2c963f66afa6); {KEY_IDS}"
        )
    return value


@click.command("reset-key")
@click.option(
    "--api-key-id",
    callback=_uuid,
    help="The sub-account key's id (a UUID), as the exchange lists the sub-account's keys "
    "(POST /api/v4/sub-account/api-key/list, with the subaccount_id of the subaccounts table).",
)
@click.option("--account", help="The main account whose key resets it; default: the first account.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
def reset_key(api_key_id: str, account: str | None, yes: bool) -> None:
    """Give a sub-account API key a new secret (the API's one write; never scheduled).

    The key keeps its id; its current secret stops working at once. The id is the one the
    exchange lists for each of a sub-account's keys (POST /api/v4/sub-account/api-key/list with
    the sub-account's subAccountId, in WhiteBIT's API documentation of sub-account API keys);
    `whitebit-etl sql "SELECT alias, subaccount_id FROM subaccounts"` gives the sub-accounts' ids.
    """
    out = console()

    async def act(client: AsyncWhiteBIT, exchange: Exchange) -> None:
        if not yes:
            click.confirm(
                f"Reset the secret of sub-account key {api_key_id} at {exchange.base_url}? "
                "Its current secret stops working at once",
                abort=True,
            )
        try:
            await client.reset_subaccount_key(api_key_id)
        except NotFoundError as exc:
            raise click.ClickException(
                f"{exc}: no key of a sub-account of this account has the id {api_key_id}; {KEY_IDS}"
            ) from None

    _, exchange = _against_exchange(out, account, act)
    out.print(f"key {api_key_id} reset at {exchange.base_url}: same id, new secret.")
