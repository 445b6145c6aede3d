"""Where the warehouse lives: the one place `WAREHOUSE_ROOT` is read."""

from __future__ import annotations

import os
from typing import Final

from upath import UPath

ROOT_ENV: Final = "WAREHOUSE_ROOT"
DEFAULT_ROOT: Final = "./data"


def warehouse_root(root: str | os.PathLike[str] | UPath | None = None) -> UPath:
    """The warehouse root: ``root`` when given, else `WAREHOUSE_ROOT`, else ``./data``.

    A local root is made absolute, because the DuckDB views store the Parquet paths they read.
    A root this returned already is returned as it is (a writer resolves its root once, then
    builds a path per partition from it).
    """
    if isinstance(root, UPath) and (not is_local(root) or os.path.isabs(root.path)):
        return root
    chosen = root if root is not None else os.environ.get(ROOT_ENV) or DEFAULT_ROOT
    path = UPath(chosen)
    if is_local(path):
        return UPath(os.path.abspath(path.path))
    return path


def is_local(path: UPath) -> bool:
    """Whether the path is on the local file system (where rename and fsync are POSIX calls)."""
    return path.protocol in ("", "file", "local")
