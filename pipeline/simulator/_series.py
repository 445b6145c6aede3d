"""One history of the ledger as the API answers it: records oldest first, as JSON bytes.

A record is staged when the ledger makes it and released when the clock reaches its time, so the
history only ever grows at its head. A record may be staged unwritten (None): `fill` writes the
records of some positions when a page first reads them. Each record keeps its time (microseconds)
and the values it is filtered by (its market, its status), as small integer codes in arrays: a
filter's records are a view (their positions), cached and extended as the history grows, and a time
window is a bisection of a view. A newest-first page is a slice, reversed.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any

import orjson

#: A view's filter: for some keys, the codes a record's value may have.
_Filter = tuple[tuple[str, frozenset[int]], ...]


class Series:
    """Records of one history, oldest first, with their times and filter values."""

    def __init__(self, *keys: str) -> None:
        self.records: list[bytes | None] = []
        #: Writes the records at these positions, when some are unwritten.
        self.fill: Callable[[Sequence[int]], None] | None = None
        self.times = array("q")
        self._keys = keys
        self._codes: dict[str, array[int]] = {key: array("I") for key in keys}
        #: key -> value -> code, and each key's values by code.
        self._code_of: dict[str, dict[Hashable, int]] = {key: {} for key in keys}
        self.values: dict[str, list[Hashable]] = {key: [] for key in keys}
        #: Made, not yet released: (time, record, values).
        self.staged: deque[tuple[int, bytes | None, tuple[Hashable, ...]]] = deque()
        #: A filter's positions, and how many records it has looked at.
        self._views: dict[_Filter, tuple[array[int], list[int]]] = {}

    def __len__(self) -> int:
        return len(self.records)

    def code(self, key: str, value: Hashable) -> int:
        """The code of a key's value (a new one the first time it is seen)."""
        codes = self._code_of[key]
        found = codes.get(value)
        if found is None:
            found = codes[value] = len(self.values[key])
            self.values[key].append(value)
        return found

    def stage(self, time_us: int, record: bytes | None, *values: Hashable) -> None:
        """A record made, to be released when the clock reaches ``time_us``; ``values`` are
        its values of the series' keys, in order. Records are staged in time order."""
        self.staged.append((time_us, record, values))

    def release(self, now_us: int) -> int:
        """Release every staged record whose time has come; the number released."""
        staged = self.staged
        count = len(staged)
        if not count or staged[0][0] > now_us:
            return 0
        if staged[-1][0] > now_us:  # only some of them: find where the clock is
            count = next(n for n, item in enumerate(staged) if item[0] > now_us)
        taken = [staged.popleft() for _ in range(count)]
        self.records.extend([item[1] for item in taken])
        self.times.extend([item[0] for item in taken])
        for n, key in enumerate(self._keys):
            codes, code_of = self._codes[key], self._code_of[key]
            for item in taken:
                value = item[2][n]
                found = code_of.get(value)
                codes.append(found if found is not None else self.code(key, value))
        return count

    def extend(
        self, times: Sequence[int], records: Sequence[bytes | None], *columns: Sequence[Hashable]
    ) -> None:
        """Records already due (nothing staged before them), released at once: their times,
        the records, and a column of values for each of the series' keys."""
        if self.staged:
            raise ValueError("records are staged before these: stage them instead")
        self.records.extend(records)
        self.times.extend(times)
        for key, column in zip(self._keys, columns, strict=True):
            known = self._code_of[key]
            for value in set(column) - known.keys():
                self.code(key, value)
            self._codes[key].extend([known[value] for value in column])

    def value(self, key: str, index: int) -> Hashable:
        """Record ``index``'s value of ``key``."""
        return self.values[key][self._codes[key][index]]

    def view(self, **filters: Hashable | Iterable[Hashable] | None) -> Sequence[int] | None:
        """Positions of the records whose values match (a key given a set matches any of its
        values; None: that key is not filtered); None when nothing is filtered (every record)."""
        wanted: list[tuple[str, frozenset[int]]] = []
        for key, value in sorted(filters.items()):
            if value is None:
                continue
            values = value if isinstance(value, set | frozenset | list | tuple) else (value,)
            codes = self._code_of[key]
            wanted.append((key, frozenset(codes[v] for v in values if v in codes)))
        if not wanted:
            return None
        positions, scanned = self._views.setdefault(tuple(wanted), (array("I"), [0]))
        columns = [(self._codes[name], codes) for name, codes in wanted]
        for index in range(scanned[0], len(self.records)):
            if all(column[index] in codes for column, codes in columns):
                positions.append(index)
        scanned[0] = len(self.records)
        return positions

    def window(
        self, view: Sequence[int] | None, start_us: int | None, end_us: int | None
    ) -> tuple[int, int]:
        """The range ``lo, hi`` of the view (or of every record) whose times fall in
        ``start_us .. end_us`` (both included; None: open)."""
        times = self.times
        if view is None:
            lo = 0 if start_us is None else bisect_left(times, start_us)
            hi = len(times) if end_us is None else bisect_right(times, end_us)
        else:
            at = times.__getitem__
            lo = 0 if start_us is None else bisect_left(view, start_us, key=at)
            hi = len(view) if end_us is None else bisect_right(view, end_us, key=at)
        return lo, max(lo, hi)

    def newest(
        self,
        offset: int,
        limit: int,
        view: Sequence[int] | None = None,
        start_us: int | None = None,
        end_us: int | None = None,
    ) -> list[int]:
        """Positions of the page ``offset .. offset+limit`` counted from the newest record of
        the view, within the time window."""
        lo, hi = self.window(view, start_us, end_us)
        top = hi - offset
        if top <= lo:
            return []
        bottom = max(lo, top - limit)
        if view is None:
            return list(range(top - 1, bottom - 1, -1))
        return list(view[bottom:top][::-1])

    def count(
        self,
        view: Sequence[int] | None = None,
        start_us: int | None = None,
        end_us: int | None = None,
    ) -> int:
        lo, hi = self.window(view, start_us, end_us)
        return hi - lo

    def written(self, positions: Sequence[int]) -> list[bytes]:
        """The records at these positions, written first if they are not yet."""
        records = self.records
        found = [records[i] for i in positions]
        if None in found and self.fill is not None:
            self.fill(positions)
            found = [records[i] for i in positions]
        return [record for record in found if record is not None]

    def joined(self, positions: Sequence[int]) -> bytes:
        """The records at these positions, as the items of a JSON array."""
        return b",".join(self.written(positions))

    def parsed(self, positions: Sequence[int]) -> list[Any]:
        """The records at these positions, parsed (for tests and checks)."""
        return [orjson.loads(record) for record in self.written(positions)]
