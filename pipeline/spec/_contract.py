"""The words the contract is written in: rate budgets, parameters, fields, answers, operations."""

from __future__ import annotations

import calendar
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date, timedelta
from enum import Enum
from typing import Any, Final, Literal

API_PREFIX: Final = "/api/v4/"

#: Every budget is published per this many seconds.
BUDGET_PERIOD_S: Final = 10.0

#: UUID in its canonical textual form; sub-account API key ids look like this.
UUID_PATTERN: Final = re.compile(
    r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
)

#: The account's histories reach back this many calendar months, to 00:00 UTC of that day.
HISTORY_MONTHS: Final = 6


def months_back(day: date, months: int) -> date:
    """The same day ``months`` calendar months earlier, clamped to that month's length (six
    months before August 31 is February 28 or 29)."""
    total = day.year * 12 + day.month - 1 - months
    year, month = divmod(total, 12)
    return date(year, month + 1, min(day.day, calendar.monthrange(year, month + 1)[1]))


def floor_day(today: date) -> date:
    """The oldest day a history with a floor still answers on ``today`` (UTC), from its 00:00."""
    return months_back(today, HISTORY_MONTHS)


def lost_on(day: date) -> date:
    """The first UTC day on which ``day`` has fallen past the floor: the exchange no longer
    answers it from then on."""
    candidate = months_back(day, -HISTORY_MONTHS)
    while floor_day(candidate) <= day:
        candidate += timedelta(days=1)
    while floor_day(candidate - timedelta(days=1)) > day:
        candidate -= timedelta(days=1)
    return candidate


@dataclass(frozen=True, slots=True)
class RateBudget:
    """Requests allowed per period, enforced per API key and per client address.

    Operations that name the same ``group`` draw from one shared budget.
    """

    group: str
    requests: int
    period_s: float = BUDGET_PERIOD_S

    @property
    def per_second(self) -> float:
        return self.requests / self.period_s


@dataclass(frozen=True, slots=True)
class Param:
    """One body (or query) parameter and the rules the service enforces on it."""

    name: str
    kind: type[int] | type[str] | type[list[Any]]
    required: bool = False
    default: int | str | None = None
    minimum: int | None = None
    maximum: int | None = None
    choices: tuple[int, ...] | None = None
    max_length: int | None = None
    pattern: re.Pattern[str] | None = None
    #: The value must name something that exists in the account (a ticker, a market, an id).
    must_exist: bool = False
    #: What a ``must_exist`` value names, when not what the parameter's name says (``markets``:
    #: the account's spot and collateral markets; ``currencies``: the exchange's tickers).
    exists_in: str = ""
    #: An integer may also come as a string of digits (``"100"``), as the service takes it.
    numeric_text: bool = False
    #: The values a text parameter may take, matched whatever their case with ``fold_case``
    #: (``"Filled"`` is ``FILLED``).
    text_choices: tuple[str, ...] | None = None
    fold_case: bool = False
    #: For a ``list``: the rule of each item, and how many items it may hold.
    items: Param | None = None
    max_items: int | None = None


def digits_param(
    name: str,
    *,
    required: bool = False,
    default: int | None = None,
    minimum: int | None = None,
    maximum: int | None = None,
) -> Param:
    """An integer parameter the service also takes as a string of digits (``"100"``)."""
    return Param(
        name,
        int,
        required=required,
        default=default,
        minimum=minimum,
        maximum=maximum,
        numeric_text=True,
    )


class FieldType(Enum):
    """JSON types of response fields, as the spec's section 2 writes them."""

    STRING = "string"
    DECIMAL = "decimal string"
    INTEGER = "integer"
    TIMESTAMP = "Unix timestamp (integer)"
    TIMESTAMP_STRING = "Unix timestamp carried as a string"
    #: Seconds with their fraction, to the microsecond: a JSON number such as 1593342324.613711.
    TIMESTAMP_FRACTIONAL = "Unix timestamp (number, fractional seconds)"
    BOOLEAN = "boolean"
    STRING_LIST = "array of string"
    OBJECT = "object"
    #: An array of objects, each of ``fields`` (a conversion's path).
    OBJECT_LIST = "array of object"


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    type: FieldType
    nullable: bool = False
    meaning: str = ""
    #: For ``OBJECT`` and ``OBJECT_LIST`` fields: the fields of the nested object.
    fields: tuple[Field, ...] = ()
    #: Absent from records it does not apply to (a stop order's activation price), rather
    #: than null.
    optional: bool = False
    #: The other name the documentation gives a record's own field (WhiteBIT's OpenAPI writes
    #: ``transaction_id`` where its older docs and the answers clients recorded write
    #: ``transactionId``): an answer may spell it either way; both, with different values, is
    #: a record nothing can read. Never on a field nested in an object.
    alias: str = ""

    def at(self, path: tuple[str, ...]) -> Field:
        """The field at ``path`` inside this object field."""
        found = self
        for name in path:
            found = {f.name: f for f in found.fields}[name]
        return found


#: How a service family words its validation messages: ``laravel`` ("The limit must be an
#: integer."), ``engine`` (the trade engine's "Limit field should be an integer."), ``keys``
#: (the convert service's translation keys, "validation.numeric_integer").
#: ``v1`` is the public v1 API's (the kline: "Market is not available.", "End field must be
#: greater then start.", as its documentation writes them).
Wording = Literal["laravel", "engine", "keys", "v1"]


@dataclass(frozen=True, slots=True)
class ValidationAnswer:
    """How the service answers a request whose parameters fail validation."""

    status: int
    code: int
    message: str = "Validation failed"
    wording: Wording = "laravel"
    #: Answered as the public v1 API answers: HTTP 200 with ``{"success": false, "message":
    #: {field: [messages]}, "result": null}`` (``code`` and ``message`` then unused).
    wrapped: bool = False


@dataclass(frozen=True, slots=True)
class TimeWindow:
    """A request's time filter (Unix seconds, both ends included) and the service's rules on it."""

    start: str
    end: str
    #: Most seconds from start to end; a longer window is refused.
    max_span_s: int | None = None
    #: The `HISTORY_MONTHS` floor: ``reject`` a start before it, or ``clamp`` to it silently
    #: (nothing older is ever answered); None: the history has no floor.
    floor: Literal["reject", "clamp"] | None = None
    #: When the start is left out: ``month`` (a calendar month before now), ``now``, or none.
    default_start: Literal["month", "now"] | None = None
    #: When the end is left out: ``now``, or none (open).
    default_end: Literal["now"] | None = None
    #: An end after now: ``clamp`` it to now, or ``reject`` one beyond now + 1 s (and a start
    #: after the end).
    future_end: Literal["clamp", "reject"] = "clamp"
    #: The record time it filters on.
    applies_to: str = ""


# --- The shape of a successful answer --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Page:
    """``{"offset": int, "limit": int, "records": [record, ...]}``: one page of a history."""

    records: tuple[Field, ...]


@dataclass(frozen=True, slots=True)
class Keyed:
    """An object keyed by free names (a ticker), each value a record."""

    record: tuple[Field, ...]


@dataclass(frozen=True, slots=True)
class Single:
    """One record: the answer is an object of these fields."""

    record: tuple[Field, ...]


@dataclass(frozen=True, slots=True)
class Listed:
    """``{"<envelope>": [record, ...]}``: every record at once, under one field."""

    envelope: str
    records: tuple[Field, ...]


@dataclass(frozen=True, slots=True)
class PageEnvelope:
    """A page whose envelope differs from `Page`'s: ``{"offset": int, "limit": int,
    "<under>": [record, ...]}``, with ``"total": int`` (every record the filters match) when
    ``total``."""

    records: tuple[Field, ...]
    under: str = "records"
    total: bool = False


@dataclass(frozen=True, slots=True)
class Grouped:
    """One page of records (its ``limit`` counts them across groups), grouped into an object
    keyed by market: ``{"BTC_USDT": [record, ...], ...}``, each group newest first. When the
    request names the ``flat_when`` parameter, a plain JSON array of the records instead."""

    records: tuple[Field, ...]
    flat_when: str | None = None


@dataclass(frozen=True, slots=True)
class Array:
    """A plain JSON array of records: ``[record, ...]``."""

    records: tuple[Field, ...]


@dataclass(frozen=True, slots=True)
class Wrapped:
    """The public v1 API's envelope: ``{"success": true, "message": null, "result": [row,
    ...]}``, each row a JSON array holding ``fields`` in their order (a candle)."""

    fields: tuple[Field, ...]


@dataclass(frozen=True, slots=True)
class KeyedNumbers:
    """An object keyed by ticker whose values are JSON numbers: ``{"USDT": 1000.5}``."""


@dataclass(frozen=True, slots=True)
class Pong:
    """A JSON array holding the string ``"pong"``."""


@dataclass(frozen=True, slots=True)
class Empty:
    """An empty JSON object."""


Answer = (
    Page
    | Keyed
    | Single
    | Listed
    | Pong
    | Empty
    | PageEnvelope
    | Grouped
    | Array
    | KeyedNumbers
    | Wrapped
)


def record_fields(answer: Answer) -> tuple[Field, ...]:
    """The fields of one record of an answer (none for an answer that holds no record)."""
    if isinstance(answer, Page | Listed | PageEnvelope | Grouped | Array):
        return answer.records
    if isinstance(answer, Keyed | Single):
        return answer.record
    if isinstance(answer, Wrapped):
        return answer.fields
    return ()


def fractional(fields: Iterable[Field]) -> bool:
    """Whether records of these fields hold JSON numbers with a fraction (a
    `FieldType.TIMESTAMP_FRACTIONAL`, at any depth): a float holds neither a time to the
    microsecond nor its digits exactly, so they are read as `Decimal`s of the digits sent."""
    return any(f.type is FieldType.TIMESTAMP_FRACTIONAL or fractional(f.fields) for f in fields)


def aliases(fields: tuple[Field, ...]) -> dict[str, str]:
    """Each field an answer may spell two ways (`Field.alias`): its name, to its alias."""
    return {f.name: f.alias for f in fields if f.alias}


@dataclass(frozen=True, slots=True)
class Operation:
    name: str
    method: Literal["GET", "POST"]
    path: str
    private: bool
    budget: RateBudget
    answer: Answer
    params: tuple[Param, ...] = ()
    validation: ValidationAnswer = ValidationAnswer(400, 0)
    #: Answer for a value that fails only the ``must_exist`` rule, when it differs (funding's
    #: unknown market is code 31).
    unknown_value: ValidationAnswer | None = None
    #: It changes state on the exchange: retried only on answers that prove it never ran.
    writes: bool = False
    summary: str = ""
    #: A budget of the endpoint's own, spent inside its group's ``budget`` (the deposit and
    #: withdrawal history: 200 per 10 s within main-account's 1000); both must have room.
    endpoint_budget: RateBudget | None = None
    #: ``offset + limit`` may not exceed this (the page at the last reachable offset is short).
    max_reach: int | None = None
    #: The request's time filter and its rules, if it has one.
    window: TimeWindow | None = None
    params_by_name: Mapping[str, Param] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "params_by_name", {p.name: p for p in self.params})

    def param(self, name: str) -> Param:
        return self.params_by_name[name]

    @property
    def record(self) -> tuple[Field, ...]:
        return record_fields(self.answer)

    @property
    def exact_numbers(self) -> bool:
        """Whether its answer holds JSON numbers with a fraction: its records' (`fractional`),
        or the numbers keyed by ticker of a `KeyedNumbers` answer."""
        return isinstance(self.answer, KeyedNumbers) or fractional(self.record)

    def bound(self, name: str) -> int:
        """The maximum the contract sets on a parameter (a page's ``limit``, its ``offset``)."""
        maximum = self.param(name).maximum
        if maximum is None:
            raise ValueError(f"{self.name}: {name} has no maximum in the contract")
        return maximum
