"""One warehouse: its root resolved once into a store, and what stays on this machine.

`Warehouse.open` takes the root a user gave (a local directory, or ``s3://bucket/prefix``) and
gives the warehouse every other module works on: its `store` (local disk or an object store,
behind one interface), its DuckDB catalog file and its local directory (both always on this
machine: DuckDB opens a local file). A remote root's local directory is one per root under the
state directory: ``<state>/whitebit-etl/s3/<bucket>/<prefix>``. The warehouse is made from a few
plain values (`WarehouseConfig`), so that a child process opens the same one.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

from pipeline import spec
from warehouse import locks
from warehouse.errors import WarehouseError
from warehouse.store import LocalStore, Store

#: The local DuckDB file of the catalog, in the local directory unless named.
CATALOG_FILE: Final = "warehouse.duckdb"
#: Object stores the warehouse is tested on.
REMOTE_PROTOCOLS: Final = ("s3",)


class RootError(WarehouseError):
    """A warehouse root that cannot be used."""


@dataclass(frozen=True, slots=True)
class WarehouseConfig:
    """What a warehouse is opened from: plain values, as the settings give them."""

    root: str
    #: The catalog file; default: ``warehouse.duckdb`` in the local directory.
    catalog: str | None = None
    #: The directory a remote root's local directory is made under; default ``~/.local/state``.
    state_home: str | None = None
    lease_seconds: float = locks.DEFAULT_LEASE_SECONDS
    lease_wait_seconds: float = locks.DEFAULT_WAIT_SECONDS
    #: The currency the curated views tell prices in (`asset_prices`).
    reference: str = spec.REFERENCE_CURRENCY

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class Warehouse:
    config: WarehouseConfig
    store: Store
    #: This machine's directory for the warehouse: the root itself when it is local.
    local_dir: Path
    catalog_path: Path

    @classmethod
    def open(cls, root: str | os.PathLike[str], **options: Any) -> Warehouse:
        """The warehouse at ``root`` (options: those of `WarehouseConfig`)."""
        return cls.of(WarehouseConfig(os.fspath(root), **options))

    @classmethod
    def of(cls, config: WarehouseConfig) -> Warehouse:
        text = config.root
        protocol = text.split("://", 1)[0] if "://" in text else ""
        store: Store
        if protocol in ("", "file", "local"):
            store = LocalStore(text.split("://", 1)[-1] if protocol else text)
            local_dir = Path(store.location)
        elif protocol in REMOTE_PROTOCOLS:
            bucket, _, prefix = text.split("://", 1)[1].partition("/")
            if "@" in bucket or ":" in bucket:
                # Never echo it: what comes before '@' may be a key.
                raise RootError(
                    f"a {protocol}:// root names a bucket only; credentials come from the "
                    "standard AWS variables or profile, never from the URL"
                )
            if not bucket:
                raise RootError(f"{protocol}:// root {text!r} names no bucket")
            from warehouse.object_store import ObjectStore

            store = ObjectStore(
                text,
                lease_seconds=config.lease_seconds,
                lease_wait_s=config.lease_wait_seconds,
            )
            state = Path(config.state_home or Path.home() / ".local" / "state")
            local_dir = state / "whitebit-etl" / protocol / bucket / prefix.strip("/")
        else:
            remote = " or ".join(f"{p}://bucket/prefix" for p in REMOTE_PROTOCOLS)
            raise RootError(f"{protocol}:// is not a supported store; use a local path or {remote}")
        catalog = (
            Path(os.path.abspath(os.path.expanduser(config.catalog)))
            if config.catalog
            else local_dir / CATALOG_FILE
        )
        return cls(config, store, local_dir, catalog)

    @property
    def location(self) -> str:
        """The root as DuckDB reads it and messages name it."""
        return self.store.location

    def elsewhere(self, root: str) -> Warehouse:
        """The warehouse at another root, opened with this one's options (the root a catalog's
        views read)."""
        options = self.config.as_json() | {"root": root, "catalog": None}
        return Warehouse.of(WarehouseConfig(**options))
