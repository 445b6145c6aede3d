"""s3fs as DuckDB reads an object store through it (`warehouse.object_store.ObjectStore.reach`).

DuckDB reads an ``s3://`` path through the fsspec filesystem registered on its connection, and
asks it about a file three times per open (the open itself, its size, its modification time),
then opens the same file more than once per query (to bind, then to scan). With s3fs and its
listing cache off (`warehouse.object_store.OPTIONS`: a file another process writes must be
seen at once), each ask is a HEAD request: ten per file and query. And a glob such as
``parquet/funding_history/*/*/data.parquet`` is walked one "directory" at a time, a listing per
partition.

`ListedS3FileSystem` answers the same questions from the query's own glob: a pattern is one
listing of the prefix before its first wildcard (a request per 1,000 keys), a plain path one
HEAD, and what they found (size, ETag, modification time) answers every later question about
those files, until the next glob that covers them looks again. Each query globs its files when
it is bound, so it sees the files as they are when it starts, as before. Reads stay pinned to
the ETag the glob found (s3fs reads with ``If-Match``): a partition replaced while a query reads
it fails that read rather than mixing two versions of the file.
"""

from __future__ import annotations

from glob import has_magic
from typing import Any

import s3fs

__all__ = ["ListedS3FileSystem"]


class ListedS3FileSystem(s3fs.S3FileSystem):  # type: ignore[misc]
    """s3fs whose globs list once and whose file details come from the latest glob (see the
    module's text)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: Details of each file the latest glob that covered it found, by ``bucket/key``.
        self._globbed: dict[str, dict[str, Any]] = {}

    async def _glob(self, path: str, maxdepth: int | None = None, **kwargs: Any) -> Any:
        detail = kwargs.pop("detail", False)
        stripped = self._strip_protocol(path)
        if has_magic(stripped):
            found = await super()._glob(path, maxdepth=maxdepth, detail=True, **kwargs)
        else:  # a plain path: looked up afresh, never from an earlier glob
            try:
                info = await super()._info(stripped)
            except FileNotFoundError:
                info = None
            found = {} if info is None or info["type"] != "file" else {stripped: info}
            if not found:
                self._globbed.pop(stripped, None)
        for name, info in found.items():
            if info["type"] == "file":
                self._globbed[name] = info
        return found if detail else list(found)

    async def _find(
        self,
        path: str,
        maxdepth: int | None = None,
        withdirs: bool | None = None,
        detail: bool = False,
        prefix: str = "",
        **kwargs: Any,
    ) -> Any:
        """One listing of everything under ``path``, cut to ``maxdepth`` here, rather than a
        listing per directory (what s3fs does with ``maxdepth``, which globs pass)."""
        found = await super()._find(path, withdirs=withdirs, detail=True, prefix=prefix, **kwargs)
        if maxdepth is not None:
            base = self._strip_protocol(path).rstrip("/")
            found = {
                name: info
                for name, info in found.items()
                if name == base or name[len(base) + 1 :].count("/") < maxdepth
            }
        return found if detail else list(found)

    async def _info(self, path: str, **kwargs: Any) -> dict[str, Any]:
        if not kwargs.get("refresh") and not kwargs.get("version_id"):
            globbed = self._globbed.get(self._strip_protocol(path))
            if globbed is not None:
                return globbed
        info: dict[str, Any] = await super()._info(path, **kwargs)
        return info
