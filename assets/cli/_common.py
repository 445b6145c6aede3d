"""What the commands share: the settings read once per command, the clock, the accounts, the
console, and one line (never a traceback) for a setting that cannot be used."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

import click
from rich.console import Console

from assets.accounts import Account, load
from assets.settings import Settings, SettingsError
from pipeline import spec
from warehouse import Warehouse, WarehouseError

DAY: Final = click.DateTime(["%Y-%m-%d"])
_SETTINGS: Final = "whitebit-etl/settings"

ACCOUNT_OPTION = click.option(
    "--account",
    "account_names",
    multiple=True,
    metavar="NAME",
    help="Only this account (repeat for several); default: every account.",
)


def console() -> Console:
    return Console(highlight=False, width=None if sys.stdout.isatty() else 110)


@contextmanager
def said_in_one_line() -> Iterator[None]:
    """A setting or an accounts file that cannot be used, or anything the warehouse cannot do (a
    root, a store, a catalog, a report: `WarehouseError`), ends the command with its one line."""
    try:
        yield
    except (SettingsError, WarehouseError) as exc:
        raise click.ClickException(str(exc)) from None


def settings() -> Settings:
    """The settings of this command's environment, read once (at the command's start) and
    checked against the day the command goes by."""
    context = click.get_current_context()
    found = context.find_object(Settings) or context.meta.get(_SETTINGS)
    if found is None:
        with said_in_one_line():
            found = Settings.from_env().check_start(clock().today())
        context.meta[_SETTINGS] = found
    return found


def clock() -> spec.Clock:
    """The clock the command and its runs go by: the one it was invoked with (``main(obj=...)``:
    a test sets the day or the minute so), else this machine's."""
    found = click.get_current_context().find_object(spec.Clock)
    return found if found is not None else spec.WALL_CLOCK


def warehouse(root: str | None = None) -> Warehouse:
    with said_in_one_line():
        return settings().warehouse(root)


def accounts() -> tuple[Account, ...]:
    """The deployment's accounts, or why they cannot be read, as the command's error."""
    with said_in_one_line():
        return load(settings())


def chosen(names: tuple[str, ...]) -> tuple[Account, ...]:
    """The accounts named (all of them when none is), or a usage error naming the unknown."""
    every = accounts()
    if not names:
        return every
    known = {account.name: account for account in every}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise click.BadParameter(
            f"unknown account(s) {', '.join(unknown)}; accounts: {', '.join(known)}",
            param_hint="--account",
        )
    return tuple(known[name] for name in dict.fromkeys(names))


def this_command() -> str:
    """How to run whitebit-etl again, in any shell, from this directory: the path of the script
    running now, relative when it is under this directory (``.venv/bin/whitebit-etl`` after
    `make`, whatever put that directory first on this process's PATH: `make demo`'s ``uv
    run``, an activated environment); else its name, when the PATH finds this very script (an
    installed command); else its whole path."""
    script = Path(sys.argv[0]).resolve()
    here = Path.cwd()
    if script.is_relative_to(here):
        relative = str(script.relative_to(here))
        return relative if "/" in relative else f"./{relative}"
    found = shutil.which("whitebit-etl")
    return "whitebit-etl" if found and Path(found).resolve() == script else str(script)
