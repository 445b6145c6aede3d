"""``move-account``: record another address for an account whose exchange moved (the same
exchange, reached another way: ``127.0.0.1`` become ``localhost``, a proxy), so that its next run
adds to its rows instead of being refused (`warehouse.sources`)."""

from __future__ import annotations

import click

from assets.accounts import BASE_URLS, base_url
from warehouse import sources
from warehouse.schemas import ACCOUNT_NAME

from ._common import console, said_in_one_line, warehouse


@click.command("move-account")
@click.argument("account")
@click.option(
    "--to",
    "url",
    required=True,
    metavar="URL",
    help="The address the account's rows come from now: global, eu or an http(s) URL.",
)
def move_account(account: str, url: str) -> None:
    """Record URL as where ACCOUNT's rows come from, in the warehouse of WAREHOUSE_ROOT: for an
    account whose exchange moved (the same account, reached at another address), whose runs the
    warehouse refuses as filled from another exchange. Its rows stay as they are; a warehouse of
    the embedded simulator's rows never moves to a real address."""
    # Neither value is echoed when it is not what it should be: it may be a secret pasted in.
    if not ACCOUNT_NAME.match(account):
        raise click.BadParameter(
            "not an account name (lower-case letters, digits and '_', starting with a letter, "
            "at most 40)",
            param_hint="ACCOUNT",
        )
    if url not in BASE_URLS and not url.startswith(("https://", "http://")):
        raise click.BadParameter("give global, eu or an http(s) URL", param_hint="--to")
    try:
        to = sources.Source.address(base_url(url))
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--to") from None
    with said_in_one_line():
        wh = warehouse()
        before = sources.move(wh, account, to)
    said = "already reads" if before == to else f"moved from {before} to"
    console().print(
        f"account {account} of the warehouse at {wh.location}: {said} {to}", soft_wrap=True
    )
