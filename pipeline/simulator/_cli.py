"""``simulator``: serve the stand-in exchange from the command line.

The command lives beside the simulator so that `spawn` starts ``python -m pipeline.simulator``
without reaching up to the application; `whitebit-etl simulator` attaches the same command.
"""

from __future__ import annotations

import click

from ._answers import SPELLINGS, Spelling
from ._data import Scale
from ._keys import DEFAULT_SUBACCOUNTS, REGIONS
from ._latency import Latency
from ._server import DEFAULT_SEED, serve


@click.command("simulator")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=0, show_default=True, help="Port; 0 picks a free one.")
@click.option("--seed", default=DEFAULT_SEED, show_default=True, help="Seed of keys and data.")
@click.option(
    "--scale",
    default="small",
    show_default=True,
    help="small, large, or sizes: markets=20,days=90,investments=500,tickers=4,fills=40 "
    "(spot fills a day: the trading volume)",
)
@click.option(
    "--frozen-at",
    type=float,
    default=None,
    help="Freeze the data clock at this Unix time (reproducible data); default: runs with time.",
)
@click.option(
    "--page-cap",
    type=click.IntRange(min=1),
    default=None,
    help="Answer at most this many records per page (its limit says so), as an exchange that "
    "caps its pages does; default: as many as asked.",
)
@click.option(
    "--subaccounts",
    type=click.IntRange(min=0),
    default=DEFAULT_SUBACCOUNTS,
    show_default=True,
    help="Sub-accounts beside the main account, each with its own key (sub_1 ..) and data.",
)
@click.option(
    "--region",
    type=click.Choice(REGIONS),
    default="global",
    show_default=True,
    help="The service it stands for: its keys and data differ between regions.",
)
@click.option(
    "--spelling",
    type=click.Choice(SPELLINGS),
    default="camel",
    show_default=True,
    help="How records name the fields WhiteBIT's documentation names two ways: camel "
    "(transactionId, uniqueId: as clients recorded its answers) or openapi (transaction_id, "
    "unique_id: as its OpenAPI file writes them).",
)
@click.option(
    "--latency",
    type=float,
    default=0.0,
    show_default=True,
    help="Seconds each answer takes there and back, as the exchange's distance (0.1: 100 ms); "
    "0: loopback's own.",
)
@click.option(
    "--jitter",
    type=float,
    default=0.0,
    show_default=True,
    help="Seconds either side of --latency each round trip is drawn within (seeded).",
)
def simulator_command(
    host: str,
    port: int,
    seed: int,
    scale: str,
    frozen_at: float | None,
    page_cap: int | None,
    subaccounts: int,
    region: str,
    spelling: Spelling,
    latency: float,
    jitter: float,
) -> None:
    """Serve the simulated WhiteBIT exchange and print its URL and demo credentials (and each
    sub-account's)."""
    try:
        parsed = Scale.parse(scale)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--scale") from exc
    try:
        distance = Latency(latency, jitter)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--latency/--jitter") from exc
    try:
        serve(
            host=host,
            port=port,
            seed=seed,
            scale=parsed,
            frozen_at=frozen_at,
            page_cap=page_cap,
            subaccounts=subaccounts,
            region=region,
            spelling=spelling,
            latency=distance,
        )
    except OSError as exc:
        where = f"{host}:{port}" if port else host
        raise click.ClickException(
            f"cannot listen on {where}: {exc.strerror or exc} (another process holds the port? "
            "--port 0 picks a free one)"
        ) from None
