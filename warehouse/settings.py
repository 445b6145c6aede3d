"""Where the warehouse lives: the one place `WAREHOUSE_ROOT` and `WAREHOUSE_CATALOG` are read.

The root is a local directory or an object-store URL (``s3://bucket/prefix``). An ``s3://`` root
is reached through s3fs with the standard AWS settings (variables or profile: credentials,
``AWS_REGION``, ``AWS_ENDPOINT_URL`` / ``AWS_ENDPOINT_URL_S3`` for an S3-compatible store) and
with its listing cache off, so that a file another process wrote is seen at once. What must stay
on this machine (the DuckDB catalog, the default Dagster home) lives in `local_dir`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Final

from upath import UPath

ROOT_ENV: Final = "WAREHOUSE_ROOT"
DEFAULT_ROOT: Final = "./data"
#: The local DuckDB file of the catalog (default: `local_dir`'s ``warehouse.duckdb``).
CATALOG_ENV: Final = "WAREHOUSE_CATALOG"
CATALOG_FILE: Final = "warehouse.duckdb"
#: Object stores the warehouse is tested on, and the storage options each is opened with.
REMOTE_OPTIONS: Final[dict[str, dict[str, Any]]] = {
    # A listing cached by one write would hide the files another process writes after it.
    "s3": {"use_listings_cache": False},
}


class RootError(ValueError):
    """A warehouse root that cannot be used."""


def warehouse_root(root: str | os.PathLike[str] | UPath | None = None) -> UPath:
    """The warehouse root: ``root`` when given, else `WAREHOUSE_ROOT`, else ``./data``.

    A local root is made absolute, because the DuckDB views store the Parquet paths they read.
    A root this returned already is returned as it is (a writer resolves its root once, then
    builds a path per partition from it).
    """
    if isinstance(root, UPath) and (not is_local(root) or os.path.isabs(root.path)):
        return root
    chosen = root if root is not None else os.environ.get(ROOT_ENV) or DEFAULT_ROOT
    text = os.fspath(chosen) if not isinstance(chosen, UPath) else str(chosen)
    protocol = text.split("://", 1)[0] if "://" in text else ""
    if protocol in ("", "file", "local"):
        return UPath(os.path.abspath(UPath(text).path))
    if protocol not in REMOTE_OPTIONS:
        raise RootError(
            f"{ROOT_ENV}: {protocol}:// is not a supported store; use a local path or "
            f"{' or '.join(f'{p}://bucket/prefix' for p in REMOTE_OPTIONS)}"
        )
    bucket = text.split("://", 1)[1].split("/", 1)[0]
    if "@" in bucket or ":" in bucket:
        # Never echo it: what comes before '@' may be a key.
        raise RootError(
            f"{ROOT_ENV}: a {protocol}:// root names a bucket only; credentials come from the "
            "standard AWS variables or profile, never from the URL"
        )
    if not bucket:
        raise RootError(f"{ROOT_ENV}: {text!r} names no bucket")
    remote: UPath = UPath(text.rstrip("/"), **REMOTE_OPTIONS[protocol])
    return remote


def is_local(path: UPath) -> bool:
    """Whether the path is on the local file system (where rename and fsync are POSIX calls)."""
    return path.protocol in ("", "file", "local")


def location(path: UPath) -> str:
    """The path as DuckDB reads it and messages name it: a local path, or the store's URL."""
    return path.path if is_local(path) else str(path)


def local_dir(root: str | os.PathLike[str] | UPath | None = None) -> Path:
    """This machine's directory for the warehouse: the root itself when it is local, else one
    per remote root under the user's state directory (``$XDG_STATE_HOME``, else
    ``~/.local/state``): ``whitebit-etl/s3/<bucket>/<prefix>``."""
    base = warehouse_root(root)
    if is_local(base):
        return Path(base.path)
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return Path(state) / "whitebit-etl" / base.protocol / base.path


def catalog_path(root: str | os.PathLike[str] | UPath | None = None) -> Path:
    """The local DuckDB file of the catalog: `WAREHOUSE_CATALOG`, else ``warehouse.duckdb`` in
    `local_dir` (a remote root's catalog is local too: DuckDB opens a local file)."""
    chosen = os.environ.get(CATALOG_ENV)
    if chosen:
        return Path(os.path.abspath(os.path.expanduser(chosen)))
    return local_dir(root) / CATALOG_FILE
