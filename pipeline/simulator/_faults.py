"""Fault injection: what a real exchange, its gateway and the network do on a bad night.

Off by default. A test switches faults on with a probability (each request draws from a seeded
random stream, so a run is repeatable) or scripts the exact sequence the next requests get.
"""

from __future__ import annotations

import json
import random
import threading
from collections import Counter, deque
from collections.abc import Callable, Iterable
from enum import Enum
from typing import Any, Literal

import orjson

#: Rewrites a successful answer's body: (request's parameters, body) -> new body.
Tamper = Callable[[dict[str, object], bytes], bytes]

#: Where `new_field` adds its field: to each record of a page or a list (``records``: a page's
#: ``records``, watcher links' ``data``, the items of a plain array, the records of every market
#: of an answer grouped by market), to each value of an answer keyed by ticker (``values``), or
#: to the answer's own object (``top``: a page's envelope, hedge mode).
Where = Literal["records", "values", "top"]


class Fault(Enum):
    HTTP_500 = "http_500"  # server error with an HTML body
    HTTP_502 = "http_502"  # bad gateway, HTML
    HTTP_503 = "http_503"  # unavailable, HTML
    GATEWAY_429 = "gateway_429"  # the gateway's rate limit: a non-JSON body
    DROP_CONNECTION = "drop_connection"  # the connection closes in the middle of the body
    SLOW = "slow"  # the answer comes late
    TRUNCATED_JSON = "truncated_json"  # a 200 whose JSON stops half way
    # Schema drift in the first record-like object of an answer: a field added is tolerated;
    # a field gone, or a number where a string belongs, makes that record a reject.
    EXTRA_FIELD = "extra_field"  # a field the spec does not have
    MISSING_FIELD = "missing_field"  # a field the spec requires is gone
    NUMBER_FOR_STRING = "number_for_string"  # a number where a string belongs

    @property
    def alters_success(self) -> bool:
        """Faults that change a successful answer rather than replace it."""
        return self in _BODY_FAULTS


_BODY_FAULTS = frozenset(
    {Fault.TRUNCATED_JSON, Fault.EXTRA_FIELD, Fault.MISSING_FIELD, Fault.NUMBER_FOR_STRING}
)


def new_field(name: str, value: Any, where: Where) -> Tamper:
    """Schema drift as exchanges do it, without notice: a field the spec does not name, added
    to every record (or value, or to the answer itself; see `Where`)."""
    if where not in ("records", "values", "top"):
        raise ValueError(f"where must be records, values or top, not {where!r}")

    def rewrite(params: dict[str, object], body: bytes) -> bytes:
        doc = orjson.loads(body)
        if where == "top":
            targets = [doc]
        elif where == "values":
            targets = list(doc.values())
        else:
            targets = _records(doc)
        for target in targets:
            target[name] = value
        return orjson.dumps(doc)

    return rewrite


def _records(doc: Any) -> list[Any]:
    """The records of an answer, whatever holds them."""
    if isinstance(doc, list):
        return doc
    for envelope in ("records", "data"):
        if envelope in doc:
            return list(doc[envelope])
    return [record for group in doc.values() if isinstance(group, list) for record in group]


def left_out(
    index: int, *, when: Callable[[dict[str, object]], bool] | None = None, answers: int | None = 1
) -> Tamper:
    """A record left out of an answer, as exchanges do now and then: the record at ``index`` of
    the answer's records in their order (-1: the last; across the markets of an answer grouped by
    market, in the order they come) is removed from the first ``answers`` answers whose request's
    parameters ``when`` accepts (None: from every one) and that hold such a record. Everything
    else is as answered, its ``total`` too, every other record byte for byte."""
    lock, left = threading.Lock(), [answers]

    def rewrite(params: dict[str, object], body: bytes) -> bytes:
        with lock:
            if left[0] == 0 or (when is not None and not when(params)):
                return body
            # Numbers kept as written: the records left in are the exchange's, exactly.
            doc = json.loads(body, parse_float=orjson.Fragment, parse_int=orjson.Fragment)
            groups = (
                [doc]
                if isinstance(doc, list)
                else [
                    group
                    for key, group in doc.items()
                    if isinstance(group, list)
                    and (key in ("records", "data") or "offset" not in doc)
                ]
            )
            places = [(group, n) for group in groups for n in range(len(group))]
            if not -len(places) <= index < len(places):
                return body  # no such record: answered as it is
            group, n = places[index]
            del group[n]
            if isinstance(doc, dict) and "offset" not in doc:
                doc = {key: group for key, group in doc.items() if group}  # no empty market
            if left[0] is not None:
                left[0] -= 1
        return orjson.dumps(doc)

    return rewrite


def repeated_key(value: Any = None) -> Tamper:
    """An answer keyed by ticker that lists its first ticker a second time, last, with
    ``value`` (default: the same value again): bytes a JSON object cannot hold once parsed."""

    def rewrite(params: dict[str, object], body: bytes) -> bytes:
        doc = orjson.loads(body)
        if not doc:
            return body  # no ticker to list twice
        key, first = next(iter(doc.items()))
        again = orjson.dumps({key: first if value is None else value})
        return body.rstrip()[:-1] + b"," + again[1:]

    return rewrite


def named_tamper(spec: dict[str, Any]) -> Tamper | None:
    """A tamper by name, as the control API takes it: ``{"kind": "new_field", "name": ...,
    "value": ..., "where": ...}``, ``{"kind": "repeated_key", "value": ...}``, or
    ``{"kind": null}`` (none)."""
    kind = spec.get("kind")
    if kind is None:
        return None
    if kind == "new_field":
        return new_field(str(spec["name"]), spec.get("value"), spec["where"])
    if kind == "repeated_key":
        return repeated_key(spec.get("value"))
    raise ValueError(f"unknown tamper {kind!r}: new_field, repeated_key or null")


class FaultInjector:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._probability = 0.0
        self._kinds: tuple[Fault, ...] = tuple(Fault)
        self._paths: frozenset[str] | None = None
        self._rng = random.Random(0)
        self._script: deque[Fault | None] = deque()
        self.slow_seconds = 0.25
        self.injected: Counter[Fault] = Counter()
        self._tampers: dict[str, Tamper] = {}

    def set(
        self,
        probability: float,
        kinds: Iterable[Fault] | None = None,
        *,
        paths: Iterable[str] | None = None,
        seed: int = 0,
        slow_seconds: float | None = None,
    ) -> None:
        """Fault each request with ``probability``, drawing the kind from ``kinds``."""
        if not 0.0 <= probability <= 1.0:
            raise ValueError(f"fault probability must be within 0..1, not {probability}")
        with self._lock:
            self._probability = probability
            self._kinds = tuple(kinds) if kinds is not None else tuple(Fault)
            if not self._kinds and probability:
                raise ValueError("fault kinds are empty")
            self._paths = frozenset(paths) if paths is not None else None
            self._rng = random.Random(seed)
            if slow_seconds is not None:
                self.slow_seconds = slow_seconds

    def script(self, faults: Iterable[Fault | None], *, paths: Iterable[str] | None = None) -> None:
        """The next requests get these faults in order (``None``: that one is answered fine)."""
        with self._lock:
            self._script = deque(faults)
            self._paths = frozenset(paths) if paths is not None else None

    def tamper(self, path: str, rewrite: Tamper | None) -> None:
        """Rewrite every successful answer of ``path`` (``None`` stops): hostile-input tests
        serve exactly the bytes they want, after authentication and validation ran as usual."""
        with self._lock:
            if rewrite is None:
                self._tampers.pop(path, None)
            else:
                self._tampers[path] = rewrite

    def tampered(self, path: str) -> Tamper | None:
        return self._tampers.get(path)

    def clear(self) -> None:
        self.set(0.0)
        self.script(())
        self._tampers.clear()

    def draw(self, path: str) -> Fault | None:
        """The fault for this request, if any."""
        with self._lock:
            if self._paths is not None and path not in self._paths:
                return None
            if self._script:
                fault = self._script.popleft()
            elif self._probability and self._rng.random() < self._probability:
                fault = self._kinds[self._rng.randrange(len(self._kinds))]
            else:
                return None
            if fault is not None:
                self.injected[fault] += 1
            return fault
