"""The bad answers of the account's trading, flows and positions histories
(`test_bad_answers_flows`): every declared history the bad-input suite (`bad_input_cases`) does
not read, crossed with every kind of bad answer, each a `Case` with the outcome it must end in.

The table is made from the declarations (`spec.HISTORIES`): a history declared tomorrow joins it
with no edit here. What a case spoils is found the same way: the path it is answered at, the first
path its walk asks (a list of owners first, for a history read per owner), a record's identity,
a field of a type to get wrong, a column whose undocumented values are kept (`unlisted="keep"`).

The kinds: the exchange refuses the key (a wrong signature, a key disabled), the gateway's 429,
a 500, 502 or 503 with HTML, a body cut short (JSON that stops half way, a connection dropped
mid-body), an HTML page with status 200, a whole answer of another JSON type, a new field in every
record, a number where a string belongs in one record, and an undocumented status in one record.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import orjson

from pipeline import spec
from pipeline.simulator import Fault, Simulator, new_field
from pipeline.whitebit import RetryPolicy
from tests.reliability.bad_input_cases import CASES as BAD_INPUT_CASES
from tests.support.simulated import FROZEN_AT

#: The tables whose answers the bad-input suite spoils (not every table of an asset that also
#: asks another operation: the balances are one step, each asked on its own path).
COVERED: Final = frozenset(
    h.name
    for h in spec.HISTORIES.values()
    if h.operation.path in {case.path for case in BAD_INPUT_CASES}
)
#: Every history fetched on its own that the bad-input suite does not cover, in declaration order.
HISTORIES: Final = tuple(
    h for h in spec.HISTORIES.values() if h.name not in COVERED and h.nested_in is None
)

#: The simulator's day (its clock is frozen in it), and the week of monthly records a run replaces.
TODAY: Final = datetime.fromtimestamp(FROZEN_AT, UTC).date()
FIRST: Final = TODAY - timedelta(days=7)

#: How often the client asks for an answer that breaks the contract, and for one cut short.
TWICE: Final = "(after 2 attempts)"
WHOLE_BUDGET: Final = f"(after {RetryPolicy().max_retries + 1} attempts)"
HTML: Final = (
    b"<!DOCTYPE html><html><head><title>Maintenance</title></head><body>Back soon</body></html>"
)
#: The field every record gains, and what a value of no documented status is.
NEW_FIELD, NEW_VALUE = "brandNewField", "x"
UNLISTED_TEXT, UNLISTED_CODE = "SURPRISE", 99

Steer = Callable[[Simulator], None]


# --- What must come of it --------------------------------------------------------------------


@dataclass(frozen=True)
class Fails:
    """The step fails, in one line naming ``path`` and saying all of ``says``; the warehouse is
    byte for byte as it was."""

    path: str
    says: tuple[str, ...]


@dataclass(frozen=True)
class Rejects:
    """One record of the table in ``_rejects``, its reason saying ``says``; every other row is
    written, and the blocking ``no_rejects`` check fails."""

    says: str


@dataclass(frozen=True)
class Drifts:
    """The run succeeds with the rows as without the field, and names it: in the materialization's
    ``unknown_fields`` and in the ``schema_drift`` check (a warning)."""

    field: str


@dataclass(frozen=True)
class Unlisted:
    """The run succeeds and the record lands with ``raw`` in ``column`` (its label, if any,
    null); the ``unlisted_values`` check fails (a warning) naming it."""

    column: str
    raw: str | int


Outcome = Fails | Rejects | Drifts | Unlisted


@dataclass(frozen=True)
class Case:
    history: spec.History
    kind: str
    #: Makes the simulator misbehave (cleared after the case); called once per run.
    steer: Steer
    outcome: Outcome
    #: The role of the simulator's key the run signs with (None: the demo key).
    role: str | None = None
    #: The run signs with the right key but a wrong secret.
    wrong_secret: bool = False
    #: The table's partitions are taken away first: a reject lands in a partition not held.
    fresh: bool = False

    @property
    def name(self) -> str:
        return f"{self.history.name}-{self.kind}"

    @property
    def path(self) -> str:
        return self.history.operation.path


# --- What a history's answers are made of ------------------------------------------------------


def first_path(history: spec.History) -> str:
    """The path a walk of the history asks first: the list of its owners, for a history read per
    owner (the sub-accounts a transfer list belongs to), else its own."""
    if isinstance(history.paging, spec.OffsetWindow):
        for split in history.paging.splits:
            if split.owner and split.listed_by is not None:
                return split.listed_by.path
    return history.operation.path


def records_of(doc: Any) -> list[Any]:
    """The records of an answer, whatever holds them: a plain array, a page's ``records`` or
    ``data``, or the arrays of an answer grouped by market."""
    if isinstance(doc, list):
        return doc
    for envelope in ("records", "data"):
        if isinstance(doc.get(envelope), list):
            return list(doc[envelope])
    return [record for group in doc.values() if isinstance(group, list) for record in group]


def identity(history: spec.History) -> tuple[str, ...]:
    """The fields a record is told apart by: its walk's identity, else its key's sources."""
    paging = history.paging
    if isinstance(paging, spec.TimeWindows):
        return paging.identity
    if isinstance(paging, spec.OffsetWindow):
        return (paging.identity,)
    return tuple(
        str(history.columns_by_name[k].source[0])
        for k in history.key
        if k in history.columns_by_name and history.columns_by_name[k].source != spec.OWNER
    )


def _top_level(history: spec.History) -> list[tuple[spec.Column, spec.Field]]:
    """The columns read from a field of the record itself, not nested, not the owner."""
    return [
        (c, history.field_of(c))
        for c in history.columns
        if len(c.source) == 1 and c.source != spec.OWNER
    ]


def one_record(history: spec.History, edit: Callable[[dict[str, Any]], None]) -> Steer:
    """Spoil one record: the first the exchange answers, wherever an answer lists it again."""

    def steer(sim: Simulator) -> None:
        fields = identity(history)
        chosen: list[tuple[Any, ...]] = []

        def tamper(params: dict[str, Any], body: bytes) -> bytes:
            doc = orjson.loads(body)
            for record in records_of(doc):
                if not isinstance(record, dict):
                    continue
                known = tuple(record.get(f) for f in fields)
                if not chosen:
                    chosen.append(known)
                if known == chosen[0]:
                    edit(record)
            return orjson.dumps(doc)

        sim.faults.tamper(history.operation.path, tamper)

    return steer


def wrong_type(history: spec.History) -> tuple[Callable[[dict[str, Any]], None], str] | None:
    """A JSON number where the record's first decimal string belongs (else an integer where its
    first text belongs), and what its reject says; None for a record with neither."""
    for wanted, value, said in (
        (spec.FieldType.DECIMAL, 1.5, "number"),
        (spec.FieldType.STRING, 12345, "integer"),
    ):
        for _, found in _top_level(history):
            if found.type is wanted and not found.nullable:
                name = found.name

                def edit(record: dict[str, Any], name: str = name, value: object = value) -> None:
                    record[name] = value

                return edit, f"{name}: {said} where a"
    return None


def unlisted(history: spec.History) -> tuple[Callable[[dict[str, Any]], None], Unlisted] | None:
    """An undocumented value in the first column that keeps one (a code outside its labels, a
    text outside its choices); None for a history that keeps none."""
    for column, found in _top_level(history):
        if column.unlisted != "keep":
            continue
        raw: str | int
        if column.labelled:
            raw = UNLISTED_CODE
        elif column.choices is not None:
            raw = UNLISTED_TEXT
        else:
            continue
        name = found.name

        def edit(record: dict[str, Any], name: str = name, raw: str | int = raw) -> None:
            record[name] = raw

        return edit, Unlisted(column.name, raw)
    return None


def _faulted(fault: Fault, path: str) -> Steer:
    return lambda sim: sim.faults.set(1.0, [fault], paths=[path])


def _server_errors(path: str) -> Steer:
    """A 500, a 502 or a 503 with an HTML body, drawn for each request (seeded)."""
    kinds = [Fault.HTTP_500, Fault.HTTP_502, Fault.HTTP_503]
    return lambda sim: sim.faults.set(1.0, kinds, paths=[path], seed=5)


def _body(path: str, rewrite: Callable[[bytes], bytes]) -> Steer:
    return lambda sim: sim.faults.tamper(path, lambda params, body: rewrite(body))


def _other_type(body: bytes) -> bytes:
    """The whole answer as a JSON value of another type: an array for an object, and the
    other way round."""
    doc = orjson.loads(body)
    return orjson.dumps({"records": doc} if isinstance(doc, list) else [doc])


def _nothing(sim: Simulator) -> None:
    """The exchange answers as it should: the key is what is wrong."""


# --- The table --------------------------------------------------------------------------------


def cases_of(history: spec.History) -> list[Case]:
    """Every kind of bad answer for one history."""
    path, first = history.operation.path, first_path(history)
    out = [
        Case(
            history, "refused-wrong-signature", _nothing,
            Fails(first, ("HTTP 401 code 10", "Unauthorized request")), wrong_secret=True,
        ),
        Case(
            history, "refused-key-disabled", _nothing,
            Fails(first, ("HTTP 401 code 2", "Enable your key")), role="disabled",
        ),
        Case(
            history, "gateway-429", _faulted(Fault.GATEWAY_429, path),
            Fails(path, ("HTTP 429", WHOLE_BUDGET)),
        ),
        Case(
            history, "http-5xx", _server_errors(path), Fails(path, ("HTTP 50", WHOLE_BUDGET)),
        ),
        Case(
            history, "cut-json", _faulted(Fault.TRUNCATED_JSON, path),
            Fails(path, ("not valid JSON", WHOLE_BUDGET)),
        ),
        Case(
            history, "cut-connection", _faulted(Fault.DROP_CONNECTION, path),
            Fails(path, ("no complete answer", WHOLE_BUDGET)),
        ),
        Case(
            history, "html-with-200", _body(path, lambda body: HTML),
            Fails(path, ("not JSON at all", "Maintenance", TWICE)),
        ),
        Case(
            history, "answer-of-another-type", _body(path, _other_type),
            Fails(path, ("(the whole answer)",)),
        ),
        Case(
            history, "new-field-in-every-record",
            lambda sim: sim.faults.tamper(path, new_field(NEW_FIELD, NEW_VALUE, "records")),
            Drifts(NEW_FIELD),
        ),
    ]  # fmt: skip
    spoiled = wrong_type(history)
    if spoiled is not None:
        edit, says = spoiled
        out.append(
            Case(history, "number-for-a-string", one_record(history, edit), Rejects(says),
                 fresh=True)
        )  # fmt: skip
    status = unlisted(history)
    if status is not None:
        edit, outcome = status
        out.append(Case(history, "undocumented-status", one_record(history, edit), outcome))
    return out


CASES: Final = [case for history in HISTORIES for case in cases_of(history)]
