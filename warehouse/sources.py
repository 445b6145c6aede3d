"""Which exchange filled each account of a warehouse: one source per account, recorded by its
first run and checked by every later one, so that rows of the embedded simulator never land
beside a real account's (or the EU service's beside the global one's).

The record is ``sources/<account>.json`` under the root (beside ``parquet/``: no view reads it),
written whole, once, under the account's lock.
"""

from __future__ import annotations

import json
from typing import Final

from warehouse.errors import WarehouseError
from warehouse.layout import account_segment
from warehouse.root import Warehouse

SOURCES_DIR: Final = "sources"


class SourceMismatch(WarehouseError):
    """A run of an account against another exchange than the one its rows came from."""


def claim(wh: Warehouse, account: str, source: str) -> None:
    """Record ``source`` (an exchange's address, or the embedded simulator with its seed) as the
    account's, or raise `SourceMismatch` when the warehouse holds the account's rows from
    another."""
    relative = f"{SOURCES_DIR}/{account_segment(account)}.json"
    held = _held(wh, relative)
    if held is None:
        with wh.store.lock(f"source-{account}"):
            held = _held(wh, relative)
            if held is None:
                wh.store.write_bytes(relative, json.dumps({"source": source}).encode())
                return
    if held != source:
        raise SourceMismatch(
            f"account {account} of the warehouse at {wh.location} was filled from {held}; this "
            f"run reads {source}. One warehouse account holds one exchange's rows: give this "
            "run another WAREHOUSE_ROOT or another account name"
        )


def _held(wh: Warehouse, relative: str) -> str | None:
    data = wh.store.read_bytes(relative)
    return None if data is None else str(json.loads(data)["source"])
