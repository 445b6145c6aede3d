"""The words the contract is written in: rate budgets, parameters, fields, answers, operations."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Final, Literal

API_PREFIX: Final = "/api/v4/"

#: Every budget is published per this many seconds.
BUDGET_PERIOD_S: Final = 10.0


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
    kind: type[int] | type[str]
    required: bool = False
    default: int | None = None
    minimum: int | None = None
    maximum: int | None = None
    choices: tuple[int, ...] | None = None
    max_length: int | None = None
    pattern: re.Pattern[str] | None = None
    #: The value must name something that exists in the account (a ticker, a market, an id).
    must_exist: bool = False


class FieldType(Enum):
    """JSON types of response fields, as the spec's section 2 writes them."""

    STRING = "string"
    DECIMAL = "decimal string"
    INTEGER = "integer"
    TIMESTAMP = "Unix timestamp (integer)"
    TIMESTAMP_STRING = "Unix timestamp carried as a string"
    BOOLEAN = "boolean"
    STRING_LIST = "array of string"
    OBJECT = "object"


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    type: FieldType
    nullable: bool = False
    meaning: str = ""
    #: For ``OBJECT`` fields: the fields of the nested object.
    fields: tuple[Field, ...] = ()

    def at(self, path: tuple[str, ...]) -> Field:
        """The field at ``path`` inside this object field."""
        found = self
        for name in path:
            found = {f.name: f for f in found.fields}[name]
        return found


@dataclass(frozen=True, slots=True)
class ValidationAnswer:
    """How the service answers a request whose parameters fail validation."""

    status: int
    code: int
    message: str = "Validation failed"


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
class Pong:
    """A JSON array holding the string ``"pong"``."""


@dataclass(frozen=True, slots=True)
class Empty:
    """An empty JSON object."""


Answer = Page | Keyed | Single | Listed | Pong | Empty


def record_fields(answer: Answer) -> tuple[Field, ...]:
    """The fields of one record of an answer (none for an answer that holds no record)."""
    if isinstance(answer, Page | Listed):
        return answer.records
    if isinstance(answer, Keyed | Single):
        return answer.record
    return ()


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
    params_by_name: Mapping[str, Param] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "params_by_name", {p.name: p for p in self.params})

    def param(self, name: str) -> Param:
        return self.params_by_name[name]

    @property
    def record(self) -> tuple[Field, ...]:
        return record_fields(self.answer)

    def bound(self, name: str) -> int:
        """The maximum the contract sets on a parameter (a page's ``limit``, its ``offset``)."""
        maximum = self.param(name).maximum
        if maximum is None:
            raise ValueError(f"{self.name}: {name} has no maximum in the contract")
        return maximum
