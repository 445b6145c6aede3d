"""The `whitebit-etl` command: everything a user does by hand."""

from __future__ import annotations

import click

from pipeline.simulator import DEFAULT_SEED, Scale
from warehouse.cli import sql_command, tables_command


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """Extract one WhiteBIT account into an exact, partitioned warehouse, and query it."""


main.add_command(sql_command)
main.add_command(tables_command)


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=0, show_default=True, help="Port; 0 picks a free one.")
@click.option("--seed", default=DEFAULT_SEED, show_default=True, help="Seed of the account's data.")
@click.option(
    "--scale",
    default="small",
    show_default=True,
    help="small, large, or sizes: markets=20,days=90,investments=500,tickers=4",
)
@click.option(
    "--frozen-at",
    type=float,
    default=None,
    help="Freeze the data clock at this Unix time (reproducible data); default: runs with time.",
)
def simulator(host: str, port: int, seed: int, scale: str, frozen_at: float | None) -> None:
    """Serve the simulated WhiteBIT exchange and print its URL and demo credentials."""
    from pipeline.simulator import serve

    try:
        parsed = Scale.parse(scale)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--scale") from exc
    serve(host=host, port=port, seed=seed, scale=parsed, frozen_at=frozen_at)


if __name__ == "__main__":
    main()
