"""``ping`` and ``reset-key``: an account's exchange, asked directly (not through a run).

``reset-key`` is the API's one write: it is offered here, deliberately, and by no schedule.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

import click
from rich.console import Console

from pipeline import spec
from pipeline.whitebit import AsyncWhiteBIT, WhiteBITError

from ._common import chosen, clock, console, settings

if TYPE_CHECKING:
    from assets.resources import Exchange

T = TypeVar("T")
log = logging.getLogger("assets.cli")


def _against_exchange(
    out: Console,
    account: str | None,
    act: Callable[[AsyncWhiteBIT, Exchange], Awaitable[T]],
) -> tuple[T, Exchange]:
    """Run ``act`` with a client of an account's exchange (default: the first account's)."""
    from assets.definitions import whitebit_resource

    (first, *_) = chosen((account,) if account else ())
    # Outside a Dagster run, EnvVar fields hold names: resolve them as a run would.
    resource = whitebit_resource(first, settings()).process_config_and_initialize()
    if resource.simulated:
        out.print("[yellow]No credentials set: using the embedded WhiteBIT simulator.[/yellow]")
    with resource.exchange(log, simulator_day=clock().today()) as exchange:

        async def run() -> T:
            async with exchange.client() as client:
                return await act(client, exchange)

        try:
            return asyncio.run(run()), exchange
        except WhiteBITError as exc:
            raise click.ClickException(str(exc)) from None


@click.command()
@click.option("--account", help="The account whose exchange to ping; default: the first.")
def ping(account: str | None) -> None:
    """Check that an account's exchange answers its public ping, and how fast."""
    out = console()

    async def act(client: AsyncWhiteBIT, exchange: Exchange) -> float:
        started = time.perf_counter()
        await client.ping()
        return time.perf_counter() - started

    seconds, exchange = _against_exchange(out, account, act)
    out.print(f"pong from {exchange.base_url} in {seconds * 1000:.1f} ms")


def _uuid(ctx: click.Context, param: click.Parameter, value: str) -> str:
    if not spec.UUID_PATTERN.match(value):
        raise click.BadParameter(
            f"{value!r} is not a UUID (like 3fa85f64-5717-4562-b3fc-2c963f66afa6)"
        )
    return value


@click.command("reset-key")
@click.option(
    "--api-key-id", required=True, callback=_uuid, help="The sub-account key's id (a UUID)."
)
@click.option("--account", help="The main account whose key resets it; default: the first account.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
def reset_key(api_key_id: str, account: str | None, yes: bool) -> None:
    """Give a sub-account API key a new secret (the API's one write; never scheduled).

    The key keeps its id; its current secret stops working at once.
    """
    out = console()

    async def act(client: AsyncWhiteBIT, exchange: Exchange) -> None:
        if not yes:
            click.confirm(
                f"Reset the secret of sub-account key {api_key_id} at {exchange.base_url}? "
                "Its current secret stops working at once",
                abort=True,
            )
        await client.reset_subaccount_key(api_key_id)

    _, exchange = _against_exchange(out, account, act)
    out.print(f"key {api_key_id} reset at {exchange.base_url}: same id, new secret.")
