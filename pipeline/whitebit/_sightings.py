"""What an offset-window walk remembers of the records it read (`spec.OffsetWindow`): a record
read again is dropped, a record read again in a later state (differing only in the fields its
history declares may change while it is read, `spec.OffsetWindow.changing`) is the same record,
and a record differing elsewhere under the same identity is another one, passed on for the
warehouse to reject: never dropped in silence."""

from __future__ import annotations

from typing import Any

import orjson

from pipeline import spec

from ._paging import identities

#: A record as the walk keeps it: its identity, and its declared fields but those that may
#: change while it is read, as bytes.
Key = tuple[str | bytes, bytes]


class Sightings:
    """The records one walk has read, by identity and declared content. A field the spec does
    not name is no difference (drift in one answer)."""

    def __init__(self, history: spec.History, paging: spec.OffsetWindow) -> None:
        record = history.operation.record
        self.identity = paging.identity
        self.alias = spec.aliases(record).get(paging.identity, "")
        changing = set(paging.changing)
        self._stable = tuple((f.name, f.alias) for f in record if f.name not in changing)
        self._changing = tuple((f.name, f.alias) for f in record if f.name in changing)
        self._seen: set[tuple[str | bytes, bytes, bytes]] = set()

    def identities(self, records: list[Any]) -> list[str | bytes]:
        return identities(records, self.identity, self.alias)

    def new(self, records: list[Any], found: list[str | bytes]) -> dict[int, Key]:
        """Where the records not read before are (``found``: their identities), with their
        keys: a record in a later state is new, its key the same as its earlier state's."""
        keys: dict[int, Key] = {}
        for n, identity in enumerate(found):
            stable, changing = self._content(records[n])
            read = (identity, stable, changing)
            if read not in self._seen:
                self._seen.add(read)
                keys[n] = (identity, stable)
        return keys

    def _content(self, record: Any) -> tuple[bytes, bytes]:
        """A record's declared fields, as bytes to compare: those that may not change, and those
        that may (the record whole where it is not an object: the warehouse rejects it)."""
        if type(record) is not dict:
            return _json(record), b""
        changing = _json(_fields(record, self._changing)) if self._changing else b""
        return _json(_fields(record, self._stable)), changing

    def changed(self, identity: str | bytes, before: Any, after: Any) -> str:
        """What a record read again in a later state says in the walk's notes."""
        shown = [
            (name, _shown(before, name, alias), _shown(after, name, alias))
            for name, alias in self._changing
        ]
        changes = ", ".join(f"{name} {old} -> {new}" for name, old, new in shown if old != new)
        named = identity.decode() if isinstance(identity, bytes) else identity
        return (
            f"{self.identity} {named} changed while the walk read it ({changes}): "
            "its latest state is kept"
        )


def _json(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS, default=str)


def _fields(record: dict[str, Any], fields: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    """The values of these fields, each under its name, else its alias."""
    return {
        name: record.get(name) if name in record or not alias else record.get(alias)
        for name, alias in fields
    }


def _shown(record: Any, name: str, alias: str) -> str:
    """A field's value as JSON, for a note."""
    return _json(_fields(record, ((name, alias),))[name] if type(record) is dict else None).decode()
