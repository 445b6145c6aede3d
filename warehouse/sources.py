"""Which exchange filled each account of a warehouse: one source per account, recorded when its
first rows land and checked by every run before its first request, so that rows of the embedded
simulator never land beside a real exchange's (in any account of the warehouse), nor the EU
service's beside the global one's (in one account).

The record is ``sources/<account>.json`` under the root (beside ``parquet/``: no view reads it),
written whole under the warehouse's lock of sources. It is written when rows land, never before:
a run that failed before its first rows (a wrong or dead address) leaves nothing recorded, and
the right address then works. `move` records another address of the same kind for an account,
when its owner says the exchange moved.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Final

from warehouse.errors import WarehouseError
from warehouse.layout import account_segment
from warehouse.root import Warehouse

SOURCES_DIR: Final = "sources"
#: What a record of the embedded simulator starts with (a record written before the kind was
#: recorded is told by it).
SIMULATOR: Final = "the embedded simulator"


class SourceMismatch(WarehouseError):
    """A run of an account against another exchange than the one its rows came from, or of the
    other kind (the embedded simulator, a real exchange) than the warehouse's rows."""


@dataclass(frozen=True, slots=True)
class Source:
    """Where an account's rows come from: an exchange's address, or the embedded simulator (with
    its seed and region)."""

    name: str
    simulated: bool

    @classmethod
    def simulator(cls, seed: int, region: str) -> Source:
        return cls(f"{SIMULATOR} (seed {seed}, {region})", simulated=True)

    @classmethod
    def address(cls, url: str) -> Source:
        return cls(url.rstrip("/"), simulated=False)

    @property
    def kind(self) -> str:
        return "simulated" if self.simulated else "real"

    def __str__(self) -> str:
        return self.name


def check(wh: Warehouse, account: str, source: Source) -> None:
    """Before any request: raise `SourceMismatch` when the warehouse holds the account's rows
    from another source, or any account's rows of the other kind."""
    _check(wh, account, source, recorded(wh))


def check_kinds(wh: Warehouse, accounts: Mapping[str, Source]) -> None:
    """Raise `SourceMismatch` when the warehouse holds any account's rows of the other kind than
    one of ``accounts``' sources (the embedded simulator's where a real exchange's would land, or
    the reverse); the records are read once."""
    held = recorded(wh)
    for account, source in accounts.items():
        _refuse_other_kind(wh, account, source, held)


def record(wh: Warehouse, account: str, source: Source) -> None:
    """As the account's first rows land: record ``source`` as the account's (checked again under
    the lock, as another run may have landed rows since this one's `check`)."""
    if _read(wh, account) == source:
        return
    with wh.store.lock(SOURCES_DIR):
        held = recorded(wh)
        _check(wh, account, source, held)
        if account not in held:
            _write(wh, account, source)


def move(wh: Warehouse, account: str, to: Source) -> Source:
    """Record ``to`` as the account's source, of the same kind as the one recorded; returns the
    one it replaces. `SourceMismatch` when the account has no rows recorded, or ``to`` is of the
    other kind."""
    before = _movable(wh, account, to)
    if before != to:
        with wh.store.lock(SOURCES_DIR):
            before = _movable(wh, account, to)
            _write(wh, account, to)
    return before


def _movable(wh: Warehouse, account: str, to: Source) -> Source:
    """The account's recorded source, which ``to`` may replace."""
    before = _read(wh, account)
    if before is None:
        known = ", ".join(sorted(recorded(wh))) or "none"
        raise SourceMismatch(
            f"account {account} of the warehouse at {wh.location} has no rows recorded "
            f"(accounts with rows: {known}): its first run records the address it reads"
        )
    if before.simulated != to.simulated:
        raise SourceMismatch(
            f"account {account} of the warehouse at {wh.location} holds {before.kind} rows "
            f"(from {before}): it cannot move to {to}, {to.kind}; a warehouse holds the "
            "embedded simulator's rows or real ones, never both"
        )
    return before


def recorded(wh: Warehouse) -> dict[str, Source]:
    """Each account's recorded source, by account."""
    found = {}
    for relative in wh.store.files(SOURCES_DIR):
        path = PurePosixPath(relative)
        if path.suffix == ".json":
            source = _read(wh, path.stem)
            if source is not None:
                found[path.stem] = source
    return found


def _check(wh: Warehouse, account: str, source: Source, held: dict[str, Source]) -> None:
    _refuse_other_kind(wh, account, source, held)
    mine = held.get(account)
    if mine is not None and mine != source:
        raise SourceMismatch(
            f"account {account} of the warehouse at {wh.location} was filled from {mine}; this "
            f"run reads {source}. One warehouse account holds one exchange's rows: give this "
            "run another WAREHOUSE_ROOT or another account name, or, if the exchange moved, "
            f"`whitebit-etl move-account {account} --to <its address>`"
        )


def _refuse_other_kind(
    wh: Warehouse, account: str, source: Source, held: dict[str, Source]
) -> None:
    """A warehouse holds the embedded simulator's rows or real ones: the other kind's, held by
    any account, refuses ``source``."""
    other = next((n for n, s in sorted(held.items()) if s.simulated != source.simulated), None)
    if other is not None:
        theirs = held[other]
        raise SourceMismatch(
            f"the warehouse at {wh.location} holds {theirs.kind} rows (account {other}, from "
            f"{theirs}); this run would add {source.kind} ones (account {account}, from "
            f"{source}): a warehouse holds the embedded simulator's rows or real ones, never "
            "both. Give this run another WAREHOUSE_ROOT"
        )


def _relative(account: str) -> str:
    return f"{SOURCES_DIR}/{account_segment(account)}.json"


def _read(wh: Warehouse, account: str) -> Source | None:
    data = wh.store.read_bytes(_relative(account))
    if data is None:
        return None
    held = json.loads(data)
    name = str(held["source"])
    return Source(name, bool(held.get("simulated", name.startswith(SIMULATOR))))


def _write(wh: Warehouse, account: str, source: Source) -> None:
    body = {"source": source.name, "simulated": source.simulated}
    wh.store.write_bytes(_relative(account), json.dumps(body).encode())
