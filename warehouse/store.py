"""How DuckDB reaches the files of an object store (`duckdb_filesystem`: s3fs, answering from
each query's own listing, `warehouse.listed_s3`), and reading again when a file was replaced under
a read (`read_again`).

s3fs (and botocore under it) is imported when an object store is first read: a run on local disk
never pays for loading it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import duckdb
import tenacity
from upath import UPath

if TYPE_CHECKING:
    from warehouse.listed_s3 import ListedS3FileSystem

__all__ = ["duckdb_filesystem", "read_again", "replaced_while_read"]


def duckdb_filesystem(base: UPath) -> ListedS3FileSystem:
    """The filesystem a DuckDB connection reads the store of ``base`` through: one per storage
    options in a process (fsspec's instance cache), as ``base``'s own is."""
    from warehouse.listed_s3 import ListedS3FileSystem

    return ListedS3FileSystem(**base.fs.storage_options)


def replaced_while_read(error: BaseException) -> bool:
    """An object replaced between a query's glob and its read (another account's run wrote its
    partition meanwhile): s3fs refuses the read, its ETag changed, and DuckDB passes the error on
    as text."""
    from s3fs.core import FileExpired

    return isinstance(error, FileExpired) or (
        isinstance(error, duckdb.Error) and FileExpired.__name__ in str(error)
    )


#: Reads across accounts (a catalog refresh, the report) run again when a write replaced a file
#: under them: a partition is replaced by one PUT, so the next glob finds the new object whole.
read_again = tenacity.retry(
    retry=tenacity.retry_if_exception(replaced_while_read),
    stop=tenacity.stop_after_attempt(5),
    wait=tenacity.wait_fixed(0.2),
    reraise=True,
)
