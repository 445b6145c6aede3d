"""Raw WhiteBIT API records -> typed Arrow tables in the shapes of `warehouse.schemas`, exactly.

One function per kind of raw input. Each takes the parsed JSON exactly as the API returned it and
gives back a `Batch` per table: the typed rows, the rejected records (raw JSON and reason) and the
counts, so that ``received == normalized + rejected + duplicates`` always holds. Nothing is
dropped silently, rounded, truncated or coerced.

Rules (the tests pin each one):

Decimals -> ``decimal128(38, 18)``
    A JSON string matching ``-?digits[.digits]``. Leading zeros of the integer part and trailing
    zeros beyond the 18th fraction digit are accepted, because the value is still exact. ``-0`` is
    zero. Rejected, each with its own reason: another JSON type (a JSON number is never coerced:
    it may already have been rounded by a float), null or missing, not a decimal number (empty,
    whitespace, ``+1``, ``.5``, ``5.``, ``1e5``, ``NaN``, ``Infinity``, ``1,000``), more than 20
    integer digits (would overflow), more than 18 significant fraction digits (would round).

Unix timestamps -> ``timestamp("us", "UTC")``
    Seconds, as the spec says: a JSON integer, or a string of ASCII digits where the spec carries
    the time as a string. A value at or above `MILLISECONDS_FROM` (1e11: as seconds that is the
    year 5138, as milliseconds 1973) is read as milliseconds. Rejected: another JSON type
    (floats and booleans included), a string that is not digits, a negative value, a time before
    `EARLIEST` (2009-01-01, before any exchange existed), and a time more than `FUTURE_TOLERANCE`
    (one day) after ``extracted_at``; fields that may lie in the future (an investment's payment
    time, a link's expiry) are instead bounded by `LATEST_SCHEDULED` (2100-01-01).

Keys
    A record whose key equals another record's key in the same batch: when the two are the same
    JSON value (compared with sorted keys) the copy is counted in ``duplicates`` and one row is
    kept; when they differ, every record of that key is rejected, since nothing tells which one is
    right.

Everything is vectorized with `pyarrow.compute`; Python loops only build the per-field input
lists from the list of dicts, and handle the (rare) rejected records.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from itertools import repeat
from typing import Any, Final, TypeAlias, cast, overload

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from warehouse import schemas
from warehouse.schemas import TableSchema

#: A timestamp at or above this is in milliseconds (as seconds it would be the year 5138).
MILLISECONDS_FROM: Final = 100_000_000_000
#: No exchange record predates this.
EARLIEST: Final = datetime(2009, 1, 1, tzinfo=UTC)
#: How far after ``extracted_at`` a past event's time may lie (clock skew between hosts).
FUTURE_TOLERANCE: Final = timedelta(days=1)
#: Upper bound for times that may be in the future (payment times, link expiries).
LATEST_SCHEDULED: Final = datetime(2100, 1, 1, tzinfo=UTC)
#: At most 20 integer and 18 fraction digits: what ``decimal128(38, 18)`` holds exactly.
INTEGER_DIGITS: Final = 20
FRACTION_DIGITS: Final = 18

#: Every field of a funding history entry (API spec 2.3): all strings.
_FUNDING_FIELDS: Final = (
    "market",
    "fundingTime",
    "fundingRate",
    "fundingAmount",
    "positionAmount",
    "settlementPrice",
    "rateCalculatedTime",
)
#: Funding records as one Arrow struct of strings (see `funding_strings`).
FUNDING_STRINGS: Final = pa.struct([(name, pa.string()) for name in _FUNDING_FIELDS])
#: Perpetual market names, ``<BASE>_PERP`` (API spec 2.3).
PERP_MARKET_PATTERN: Final = r"^[A-Z0-9]{1,20}_PERP$"
#: An asset ticker: 1-32 letters, digits, '_', '.', '-', starting with a letter or digit.
TICKER_PATTERN: Final = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$"
TICKER_FORM: Final = "a ticker (1-32 letters, digits, '_', '.', '-', not starting with a symbol)"
#: Mining-pool account names are at most 255 characters (API spec 4.7).
ACCOUNT_MAX_LENGTH: Final = 255

_DECIMAL_SHAPE: Final = r"^-?[0-9]+(\.[0-9]+)?$"
#: A field's raw values: JSON values as parsed, or (read in one pass) already an Arrow array.
Raw: TypeAlias = list[object] | pa.Array
_TEXT_NULL: Final = pa.scalar(None, pa.string())


# --- Results ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Batch:
    """One table's share of a normalization: typed rows, rejected records and counts."""

    table: str
    #: Rows in the shape of ``schemas.TABLES[table].arrow_schema``.
    rows: pa.Table
    #: Rejected records in the shape of ``schemas.TABLES["_rejects"].arrow_schema``.
    rejects: pa.Table
    #: Records received (for ``fixed_plans``: plan objects carried by the investments).
    received: int
    #: Exact copies of a record already in the batch, kept once.
    duplicates: int
    #: Partitions this batch is the whole truth for, even where it holds no row (the snapshot
    #: day; the funding day the caller named). Writing the batch replaces each of them.
    covers: tuple[date, ...] = ()

    @property
    def normalized(self) -> int:
        return int(self.rows.num_rows)

    @property
    def rejected(self) -> int:
        return int(self.rejects.num_rows)

    @property
    def schema(self) -> TableSchema:
        return schemas.TABLES[self.table]


@dataclass(frozen=True, slots=True)
class InvestmentBatches:
    """An investments snapshot gives two tables: the investments and the plans they reference."""

    investments: Batch
    fixed_plans: Batch

    def __iter__(self) -> Iterator[Batch]:
        return iter((self.investments, self.fixed_plans))


# --- Public entry points -----------------------------------------------------------------------


def normalize_funding_history(
    records: object, *, extracted_at: datetime, partition_for_rejects: date
) -> Batch:
    """Funding history entries (API spec 2.3) -> ``funding_history`` rows.

    ``records`` is the JSON array as parsed, or those records as `funding_strings` gave them.

    ``funding_date`` is the UTC day of each record's own ``fundingTime``, so a batch may span
    days. A record whose time cannot be read is rejected into the day of the record before it
    in the batch, or into ``partition_for_rejects`` (the day the caller was reading) when no
    record before it has a readable time.
    """
    extracted_at = _utc(extracted_at)
    schema = schemas.FUNDING_HISTORY
    intake = _Intake.of_array(records, "funding history entries")
    past = _TimeBounds.past(extracted_at)
    get = intake.strings(_FUNDING_FIELDS)
    funding_time = _timestamp("fundingTime", get("fundingTime"), past, carried_as_string=True)
    position_amount = _decimal("positionAmount", get("positionAmount"))
    zero = pa.scalar(0, schemas.MONEY)
    columns = {
        "market": _text("market", get("market"), PERP_MARKET_PATTERN, "of the form <BASE>_PERP"),
        "funding_time": funding_time,
        "position_side": _Converted(
            pc.if_else(pc.greater_equal(position_amount.values, zero), schemas.LONG, schemas.SHORT),
            _no_reasons(len(intake)),
        ),
        "funding_rate": _decimal("fundingRate", get("fundingRate")),
        "funding_amount": _decimal("fundingAmount", get("fundingAmount")),
        "position_amount": position_amount,
        "settlement_price": _decimal("settlementPrice", get("settlementPrice")),
        "rate_calculated_time": _timestamp(
            "rateCalculatedTime", get("rateCalculatedTime"), past, carried_as_string=True
        ),
    }
    funding_date = pc.cast(funding_time.values, schemas.DAY)
    # The API lists newest first: a record whose time cannot be read belongs with the record
    # before it, so every rerun of that day rejects it into that day again.
    neighbour_day = pc.fill_null_forward(pc.cast(funding_date, pa.string()))
    reject_partition = pc.coalesce(neighbour_day, pa.scalar(partition_for_rejects.isoformat()))
    return _assemble(
        schema,
        intake,
        {**columns, "funding_date": _Converted(funding_date, _no_reasons(len(intake)))},
        extracted_at=extracted_at,
        reject_partition=reject_partition,
        home_partition=partition_for_rejects,
    )


def normalize_investments(
    records: object, *, snapshot_date: date, extracted_at: datetime
) -> InvestmentBatches:
    """Investments (API spec 2.1) -> ``investments`` rows and their distinct ``fixed_plans``.

    The nested plan is flattened into ``plan_*`` columns and also normalized on its own into
    ``fixed_plans`` (one row per plan id; a plan object seen with two contents is rejected).
    """
    extracted_at = _utc(extracted_at)
    intake = _Intake.of_array(records, "investments")
    intake = intake.require_object("plan")
    bounds = _TimeBounds.past(extracted_at)
    scheduled = _TimeBounds.scheduled()
    get = intake.values
    columns = {
        "investment_id": _text("id", get("id")),
        **_status("status", get("status"), schemas.INVESTMENT_STATUS_LABELS, "status"),
        "created": _timestamp("created", get("created"), bounds),
        "updated": _timestamp("updated", get("updated"), bounds),
        "payment_time": _timestamp("paymentTime", get("paymentTime"), scheduled),
        "amount": _decimal("amount", get("amount")),
        "interest_paid": _decimal("interestPaid", get("interestPaid")),
        "plan_id": _text("plan.id", intake.values("plan", "id")),
        **_plan_columns(lambda name: intake.values("plan", name), "plan.", "plan_"),
    }
    investments = _assemble(
        schemas.INVESTMENTS,
        intake,
        columns,
        extracted_at=extracted_at,
        snapshot_date=snapshot_date,
        home_partition=snapshot_date,
    )

    plans = _Intake.of_nested_objects(records, "plan")
    get_plan = plans.values
    plan_columns = {"plan_id": _text("id", get_plan("id")), **_plan_columns(get_plan, "", "")}
    fixed_plans = _assemble(
        schemas.FIXED_PLANS,
        plans,
        plan_columns,
        extracted_at=extracted_at,
        snapshot_date=snapshot_date,
        home_partition=snapshot_date,
    )
    return InvestmentBatches(investments, fixed_plans)


def normalize_main_balances(
    balances: object, *, snapshot_date: date, extracted_at: datetime
) -> Batch:
    """Main balance ``{ticker: {"main_balance": str}}`` (API spec 2.4) -> one row per ticker.

    Every listed asset is kept, an explicit zero included.
    """
    return _normalize_balances(
        schemas.MAIN_BALANCES,
        balances,
        {"main_balance": "main_balance"},
        snapshot_date,
        extracted_at,
    )


def normalize_trading_balances(
    balances: object, *, snapshot_date: date, extracted_at: datetime
) -> Batch:
    """Trading balance ``{ticker: {"available": str, "freeze": str}}`` -> one row per ticker.

    ``freeze`` becomes the column ``frozen``: FREEZE is a reserved word in DuckDB's SQL.
    """
    return _normalize_balances(
        schemas.TRADING_BALANCES,
        balances,
        {"available": "available", "frozen": "freeze"},
        snapshot_date,
        extracted_at,
    )


def normalize_hedge_mode(status: object, *, snapshot_date: date, extracted_at: datetime) -> Batch:
    """Hedge-mode status ``{"hedgeMode": bool}`` (API spec 2.6) -> one row."""
    extracted_at = _utc(extracted_at)
    intake = _Intake.of_single_object(status, "hedge-mode status")
    return _assemble(
        schemas.HEDGE_MODE,
        intake,
        {"hedge_mode": _boolean("hedgeMode", intake.values("hedgeMode"))},
        extracted_at=extracted_at,
        snapshot_date=snapshot_date,
        home_partition=snapshot_date,
    )


def normalize_watcher_links(
    links_by_account: Mapping[str, object], *, snapshot_date: date, extracted_at: datetime
) -> Batch:
    """Watcher links (API spec 2.5) of each mining account -> one row per (account, link).

    All accounts go in one call because they share the snapshot's partition.
    """
    extracted_at = _utc(extracted_at)
    for account in links_by_account:
        if not isinstance(account, str) or not 0 < len(account) <= ACCOUNT_MAX_LENGTH:
            raise ValueError(
                f"watcher links: mining account must be 1-{ACCOUNT_MAX_LENGTH} characters, "
                f"got {account!r}"
            )
    intake = _Intake.of_arrays_by_owner(links_by_account, "watcher links", owner="account")
    bounds = _TimeBounds.past(extracted_at)
    get = intake.values
    columns = {
        "account": _Converted(pa.array(intake.owners, pa.string()), _no_reasons(len(intake))),
        "link_id": _text("id", get("id")),
        "accounts": _text_list("accounts", get("accounts")),
        "name": _text("name", get("name"), allow_empty=True),
        "link": _text("link", get("link")),
        "permissions": _text_list("permissions", get("permissions")),
        "live_until": _present(
            "liveUntil",
            intake,
            _timestamp("liveUntil", get("liveUntil"), _TimeBounds.scheduled(), nullable=True),
        ),
        "created_at": _timestamp("createdAt", get("createdAt"), bounds),
    }
    return _assemble(
        schemas.WATCHER_LINKS,
        intake,
        columns,
        extracted_at=extracted_at,
        snapshot_date=snapshot_date,
        home_partition=snapshot_date,
    )


def funding_strings(records: list[Any]) -> pa.StructArray | None:
    """Funding records as one Arrow struct of their fields (`FUNDING_STRINGS`), when that holds
    them exactly: each record a JSON object of exactly the funding fields, every one a string
    (valid Unicode). Otherwise None, and the records travel as they are.

    Either form normalizes to the same rows and rejects, except that a reject's ``raw_json``
    lists the fields in the spec's order (a JSON object's order carries no meaning). The struct
    is what the funding writer process receives: Arrow's IPC costs its reader nothing, where
    parsing JSON back into Python objects cost it ~3 us a record.
    """
    # At C speed (map), not a Python frame a record: this runs on every chunk of a walk.
    if not all(map(isinstance, records, repeat(dict))) or set(map(len, records)) != {
        len(_FUNDING_FIELDS)
    }:
        return None
    try:
        struct = pa.array(records, type=FUNDING_STRINGS)
    except (pa.ArrowInvalid, pa.ArrowTypeError, UnicodeEncodeError):
        return None
    # A field absent (or null) reads as a null: not the record as sent.
    if any(field.null_count for field in struct.flatten()):
        return None
    return struct


def parse_decimals(values: Sequence[object], field: str = "value") -> tuple[pa.Array, pa.Array]:
    """Decimal strings -> ``decimal128(38, 18)`` by the rules above, vectorized.

    Returns the typed values (null where rejected) and, per value, the reason it was rejected
    (null where accepted).
    """
    converted = _decimal(field, list(values))
    return converted.values, converted.reasons


# --- Intake: raw JSON -> records with their positions ------------------------------------------


@dataclass(slots=True)
class _Intake:
    """The JSON objects of a batch that go on to field checks, and those rejected before.

    ``objects[i]`` came from input position ``indices[i]``; ``raw[position]`` is the record as
    received; ``context[position]`` prefixes its reject reason (e.g. the mining account).
    """

    objects: Sequence[dict[str, object]]
    indices: list[int]
    raw: dict[int, object] | Sequence[object]
    received: int
    early_rejects: list[tuple[int, str]] = field(default_factory=list)
    owners: list[str] = field(default_factory=list)
    context: dict[int, str] = field(default_factory=dict)
    duplicates: int = 0

    def __len__(self) -> int:
        return len(self.objects)

    @classmethod
    def of_array(cls, records: object, what: str) -> _Intake:
        if isinstance(records, pa.StructArray):  # from `funding_strings`: objects, all strings
            held = _StructRecords(records)
            return cls(held, list(range(len(held))), held, len(held))
        if not isinstance(records, list):
            return cls([], [], {0: records}, 1, [(0, f"expected a JSON array of {what}")])
        if all(isinstance(record, dict) for record in records):
            return cls(records, list(range(len(records))), records, len(records))
        intake = cls([], [], records, len(records))
        for position, record in enumerate(records):
            intake._take(position, record)
        return intake

    @classmethod
    def of_single_object(cls, value: object, what: str) -> _Intake:
        intake = cls([], [], {0: value}, 1)
        intake._take(0, value, what)
        return intake

    @classmethod
    def of_arrays_by_owner(cls, arrays: Mapping[str, object], what: str, *, owner: str) -> _Intake:
        raw: dict[int, object] = {}
        intake = cls([], [], raw, 0)
        position = 0
        for name, records in arrays.items():
            if not isinstance(records, list):
                raw[position] = records
                intake.context[position] = f"{owner} {name!r}: "
                intake.early_rejects.append((position, f"expected a JSON array of {what}"))
                intake.received += 1
                position += 1
                continue
            for record in records:
                raw[position] = record
                intake.context[position] = f"{owner} {name!r}: "
                intake.received += 1
                if intake._take(position, record):
                    intake.owners.append(name)
                position += 1
        return intake

    @classmethod
    def of_nested_objects(cls, records: object, key: str) -> _Intake:
        """The distinct objects under ``key`` of each record; identical copies are duplicates."""
        raw: dict[int, object] = {}
        intake = cls([], [], raw, 0)
        if not isinstance(records, list):
            return intake
        first_seen: dict[str, int] = {}
        for position, record in enumerate(records):
            nested = record.get(key) if isinstance(record, dict) else None
            if not isinstance(nested, dict):
                continue  # the owning record is rejected for it; no plan was received
            intake.received += 1
            identity = _canonical_json(nested)
            if identity in first_seen:
                intake.duplicates += 1
                continue
            first_seen[identity] = position
            raw[position] = nested
            intake.context[position] = f"{key} of record {position}: "
            intake._take(position, nested)
        return intake

    def _take(self, position: int, record: object, what: str = "record") -> bool:
        assert isinstance(self.objects, list), "records held as a struct are all objects"
        if isinstance(record, dict):
            self.objects.append(record)
            self.indices.append(position)
            return True
        self.early_rejects.append((position, f"{what}: expected a JSON object"))
        return False

    def require_object(self, key: str) -> _Intake:
        """Reject, before field checks, the records whose ``key`` is not a JSON object."""
        kept = [(o, i) for o, i in zip(self.objects, self.indices, strict=True)]
        self.objects, self.indices = [], []
        for record, position in kept:
            if isinstance(record.get(key), dict):
                self.objects.append(record)
                self.indices.append(position)
            else:
                self.early_rejects.append((position, f"{key}: missing or not a JSON object"))
        return self

    def values(self, *path: str) -> list[object]:
        """The raw values at ``path`` of each object (``None`` where absent)."""
        if len(path) == 1:
            (key,) = path
            return [o.get(key) for o in self.objects]
        outer, key = path
        # require_object() kept only the records whose ``outer`` is a JSON object.
        nested = cast(list[dict[str, object]], [o[outer] for o in self.objects])
        return [n.get(key) for n in nested]

    def present(self, key: str) -> list[bool]:
        return [key in o for o in self.objects]

    def strings(self, keys: Sequence[str]) -> Callable[[str], Raw]:
        """The values at ``keys``: read in one pass as Arrow strings when every one of them is a
        string or absent (Arrow's converter, not a Python loop per field); else field by field,
        so that each value of another JSON type gets its reason."""
        if isinstance(self.objects, _StructRecords):
            held = {k: self.objects.struct.field(k) for k in keys}
            return lambda key: held[key]
        try:
            struct = pa.array(self.objects, type=pa.struct([(k, pa.string()) for k in keys]))
        except (pa.ArrowInvalid, pa.ArrowTypeError, UnicodeEncodeError):
            return self.values
        read = {k: struct.field(k) for k in keys}
        return lambda key: read[key]


class _StructRecords(Sequence[dict[str, object]]):
    """Records held as an Arrow struct of strings. A record is built as a dict only when it is
    asked for (a reject's raw JSON, a duplicate's content)."""

    def __init__(self, struct: pa.StructArray) -> None:
        self.struct = struct

    def __len__(self) -> int:
        return len(self.struct)

    @overload
    def __getitem__(self, index: int) -> dict[str, object]: ...

    @overload
    def __getitem__(self, index: slice) -> list[dict[str, object]]: ...

    def __getitem__(self, index: int | slice) -> dict[str, object] | list[dict[str, object]]:
        if isinstance(index, slice):
            return [self[i] for i in range(len(self))[index]]
        record: dict[str, object] = self.struct[index].as_py()
        return record


# --- Field converters: raw values -> typed array + reject reasons ------------------------------


@dataclass(frozen=True, slots=True)
class _Converted:
    """A typed column (null where invalid) and, per row, why it is invalid (null: valid)."""

    values: pa.Array
    reasons: pa.Array


def _no_reasons(length: int) -> pa.Array:
    return pa.nulls(length, pa.string())


def _reason_where(mask: pa.Array, reason: str) -> pa.Array:
    mask = pc.fill_null(mask, False)
    if not pc.any(mask).as_py():  # the common case: no text column to build (~8x cheaper)
        return _no_reasons(len(mask))
    return pc.if_else(mask, pa.scalar(reason), _TEXT_NULL)


def _first_reason(*reasons: pa.Array) -> pa.Array:
    given = [r for r in reasons if r.null_count < len(r)] or [reasons[0]]
    return pc.coalesce(*given) if len(given) > 1 else given[0]


def _json_type(value: object) -> str:
    match value:
        case bool():
            return "boolean"
        case int():
            return "integer"
        case float():
            return "number"
        case str():
            return "string"
        case list():
            return "array"
        case dict():
            return "object"
    return type(value).__name__


def _typed(
    name: str,
    raw: Raw,
    arrow_type: pa.DataType,
    expected: str,
    accepts: Callable[[object], bool],
) -> tuple[pa.Array, pa.Array]:
    """Raw JSON values as one Arrow type, and a reason where a value has another JSON type.

    Arrow's own type inference is the fast path; it is only trusted when it lands on the expected
    type, because an explicitly typed conversion would truncate 1.5 to 1.
    """
    if isinstance(raw, pa.Array):  # read in one pass by `_Intake.strings`: already this type
        if raw.type != arrow_type:
            raise AssertionError(f"{name}: {raw.type} read where {arrow_type} was asked")
        return raw, _no_reasons(len(raw))
    try:
        inferred = pa.array(raw)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, UnicodeEncodeError):
        inferred = None
    if inferred is not None and _inferred_cleanly(inferred, arrow_type):
        return inferred.cast(arrow_type), _no_reasons(len(raw))
    # Slow path, only for a batch holding a value of another JSON type.
    reasons = [_wrong_value(name, v, expected, accepts) for v in raw]
    kept = [v if reason is None else None for v, reason in zip(raw, reasons, strict=True)]
    return pa.array(kept, arrow_type), pa.array(reasons, pa.string())


def _wrong_value(
    name: str, value: object, expected: str, accepts: Callable[[object], bool]
) -> str | None:
    if value is None:
        return None
    if not accepts(value):
        return _wrong_type(name, value, expected)
    if _unencodable(value):
        return f"{name}: text that is not valid Unicode (a lone surrogate)"
    return None


def _unencodable(value: object) -> bool:
    """A string (or strings in a list) that UTF-8, and so Parquet, cannot hold."""
    texts = value if isinstance(value, list) else [value]
    try:
        for text in texts:
            if isinstance(text, str):
                text.encode()
    except UnicodeEncodeError:
        return True
    return False


def _wrong_type(name: str, value: object, expected: str) -> str:
    if type(value) is int and expected.startswith("an integer"):
        return f"{name}: integer outside the 64-bit range"
    if type(value) is list and expected == "an array of strings":
        return f"{name}: array holding a non-string item"
    return f"{name}: {_json_type(value)} where {expected} belongs"


def _inferred_cleanly(inferred: pa.Array, arrow_type: pa.DataType) -> bool:
    if inferred.type == pa.null():
        return True
    if pa.types.is_list(arrow_type):
        if not pa.types.is_list(inferred.type):
            return False
        items = pc.list_flatten(inferred)
        return bool(items.type in (pa.null(), pa.string()) and items.null_count == 0)
    return bool(inferred.type == arrow_type)


def _is_str(value: object) -> bool:
    return type(value) is str


def _is_int64(value: object) -> bool:
    return type(value) is int and -(2**63) <= value < 2**63


def _is_bool(value: object) -> bool:
    return type(value) is bool


def _is_str_list(value: object) -> bool:
    return type(value) is list and all(type(v) is str for v in value)


def _missing(name: str, values: pa.Array) -> pa.Array:
    return _reason_where(pc.is_null(values), f"{name}: missing or null")


def _decimal(name: str, raw: Raw) -> _Converted:
    """Decimal strings -> ``decimal128(38, 18)``, exactly, or a reason per value."""
    text, wrong_type = _typed(name, raw, pa.string(), "a decimal string", _is_str)
    shaped = pc.fill_null(pc.match_substring_regex(text, _DECIMAL_SHAPE), False)
    candidate = text
    integer_digits, fraction_digits = _digit_counts(candidate)
    too_long = pc.greater(integer_digits, INTEGER_DIGITS)
    too_precise = pc.greater(fraction_digits, FRACTION_DIGITS)
    if pc.any(pc.and_(shaped, pc.or_(too_long, too_precise))).as_py():
        # Leading zeros and zeros past the 18th place change nothing: drop them, so that only
        # significant digits count (a rare, slower path).
        candidate = pc.replace_substring_regex(candidate, r"^(-?)0+([0-9])", r"\1\2")
        pattern = rf"^(-?[0-9]+\.[0-9]{{{FRACTION_DIGITS}}})0+$"
        candidate = pc.replace_substring_regex(candidate, pattern, r"\1")
        integer_digits, fraction_digits = _digit_counts(candidate)
    too_long = pc.greater(integer_digits, INTEGER_DIGITS)
    too_precise = pc.greater(fraction_digits, FRACTION_DIGITS)
    exact = pc.and_(shaped, pc.invert(pc.or_(too_long, too_precise)))
    if pc.all(exact).as_py():
        values = pc.cast(candidate, schemas.MONEY)  # casting without a validity mask is faster
    else:
        values = pc.cast(pc.if_else(exact, candidate, _TEXT_NULL), schemas.MONEY)
    reasons = _first_reason(
        wrong_type,
        _missing(name, text),
        _reason_where(pc.invert(shaped), f"{name}: not a decimal number"),
        _reason_where(
            too_long,
            f"{name}: more than {INTEGER_DIGITS} integer digits (would overflow DECIMAL(38,18))",
        ),
        _reason_where(
            too_precise,
            f"{name}: more than {FRACTION_DIGITS} decimal places (would round)",
        ),
    )
    return _Converted(values, reasons)


def _digit_counts(decimal_text: pa.Array) -> tuple[pa.Array, pa.Array]:
    length = pc.utf8_length(decimal_text)
    dot = pc.find_substring(decimal_text, ".")
    has_dot = pc.greater_equal(dot, 0)
    sign = pc.cast(pc.starts_with(decimal_text, "-"), pa.int32())
    integer_digits = pc.subtract(pc.if_else(has_dot, dot, length), sign)
    fraction_digits = pc.if_else(has_dot, pc.subtract(pc.subtract(length, dot), 1), 0)
    return integer_digits, fraction_digits


@dataclass(frozen=True, slots=True)
class _TimeBounds:
    """The instants a timestamp field may take, and how a value outside is explained."""

    earliest: datetime
    latest: datetime
    too_late: str

    @classmethod
    def past(cls, extracted_at: datetime) -> _TimeBounds:
        latest = extracted_at + FUTURE_TOLERANCE
        return cls(EARLIEST, latest, "more than a day after extracted_at")

    @classmethod
    def scheduled(cls) -> _TimeBounds:
        return cls(EARLIEST, LATEST_SCHEDULED, f"after {LATEST_SCHEDULED.date().isoformat()}")


def _timestamp(
    name: str,
    raw: Raw,
    bounds: _TimeBounds,
    *,
    carried_as_string: bool = False,
    nullable: bool = False,
) -> _Converted:
    """Unix seconds (or milliseconds, told by magnitude) -> UTC timestamps, or a reason."""
    if carried_as_string:
        text, wrong_type = _typed(name, raw, pa.string(), "a string of Unix seconds", _is_str)
        digits = pc.fill_null(pc.match_substring_regex(text, r"^[0-9]+$"), False)
        # 18 digits always fit int64; longer strings are far outside any bound anyway.
        too_long = pc.and_(digits, pc.greater(pc.utf8_length(text), 18))
        integers = pc.cast(
            pc.if_else(pc.and_(digits, pc.invert(too_long)), text, _TEXT_NULL), pa.int64()
        )
        shape_reasons = [
            _missing(name, text),
            _reason_where(pc.invert(digits), f"{name}: not a Unix timestamp (ASCII digits only)"),
            _reason_where(too_long, f"{name}: more than 18 digits, not a Unix timestamp"),
        ]
        present = pc.is_valid(text)
    else:
        integers, wrong_type = _typed(name, raw, pa.int64(), "an integer Unix timestamp", _is_int64)
        shape_reasons = [
            _missing(name, integers),
            _reason_where(pc.less(integers, 0), f"{name}: negative Unix timestamp"),
        ]
        present = pc.is_valid(integers)
    if nullable:
        # A JSON null is allowed; a value of the wrong type still is not.
        shape_reasons = shape_reasons[1:]
    in_ms = pc.greater_equal(integers, MILLISECONDS_FROM)
    earliest_s, latest_s = int(bounds.earliest.timestamp()), int(bounds.latest.timestamp())
    too_early = pc.less(integers, pc.if_else(in_ms, earliest_s * 1000, earliest_s))
    too_late = pc.greater(integers, pc.if_else(in_ms, latest_s * 1000, latest_s))
    earliest_text = bounds.earliest.date().isoformat()
    reasons = _first_reason(
        wrong_type,
        *shape_reasons,
        _reason_where(too_early, f"{name}: before {earliest_text}"),
        _reason_where(too_late, f"{name}: {bounds.too_late}"),
    )
    usable = pc.and_(pc.is_null(reasons), present)
    bounded = pc.if_else(usable, integers, pa.scalar(None, pa.int64()))
    micros = pc.if_else(in_ms, pc.multiply(bounded, 1_000), pc.multiply(bounded, 1_000_000))
    return _Converted(pc.cast(micros, schemas.UTC_TIME), reasons)


def _integer(name: str, raw: list[object], *, minimum: int = 0) -> _Converted:
    integers, wrong_type = _typed(name, raw, pa.int64(), "an integer", _is_int64)
    too_small = pc.less(integers, minimum)
    reasons = _first_reason(
        wrong_type,
        _missing(name, integers),
        _reason_where(too_small, f"{name}: less than {minimum}"),
    )
    kept = pc.if_else(pc.fill_null(too_small, False), pa.scalar(None, pa.int64()), integers)
    return _Converted(kept, reasons)


def _status(
    name: str, raw: list[object], labels: Mapping[int, str], column: str
) -> dict[str, _Converted]:
    """An integer status, kept, and its label; a status the spec does not list is a reject."""
    converted = _integer(name, raw, minimum=0)
    codes = pa.array(list(labels), pa.int64())
    position = pc.index_in(converted.values, value_set=codes)
    label = pc.take(pa.array(list(labels.values()), pa.string()), position)
    known = ", ".join(f"{code} ({text})" for code, text in labels.items())
    unknown = pc.and_(pc.is_valid(converted.values), pc.is_null(position))
    reasons = _first_reason(
        converted.reasons, _reason_where(unknown, f"{name}: not a known status ({known})")
    )
    return {
        column: _Converted(converted.values, reasons),
        f"{column}_label": _Converted(label, _no_reasons(len(raw))),
    }


def _text(
    name: str,
    raw: Raw,
    pattern: str | None = None,
    pattern_description: str = "",
    *,
    allow_empty: bool = False,
) -> _Converted:
    text, wrong_type = _typed(name, raw, pa.string(), "a string", _is_str)
    checks = [wrong_type, _missing(name, text)]
    if not allow_empty:
        checks.append(_reason_where(pc.equal(text, ""), f"{name}: empty"))
    if pattern is not None:
        mismatch = pc.invert(pc.match_substring_regex(text, pattern))
        checks.append(_reason_where(mismatch, f"{name}: not {pattern_description}"))
    return _Converted(text, _first_reason(*checks))


def _text_list(name: str, raw: list[object]) -> _Converted:
    lists, wrong_type = _typed(name, raw, schemas.TEXT_LIST, "an array of strings", _is_str_list)
    return _Converted(lists, _first_reason(wrong_type, _missing(name, lists)))


def _boolean(name: str, raw: list[object]) -> _Converted:
    flags, wrong_type = _typed(name, raw, pa.bool_(), "a boolean", _is_bool)
    return _Converted(flags, _first_reason(wrong_type, _missing(name, flags)))


def _present(name: str, intake: _Intake, converted: _Converted) -> _Converted:
    """A nullable field must still be there: JSON null is a value, an absent key is not."""
    absent = pc.invert(pa.array(intake.present(name), pa.bool_()))
    reason = _reason_where(absent, f"{name}: missing (null is allowed, absence is not)")
    return _Converted(converted.values, _first_reason(converted.reasons, reason))


def _plan_columns(
    get: Callable[[str], list[object]], field_prefix: str, column_prefix: str
) -> dict[str, _Converted]:
    """A FixedPlan object's fields (API spec 2.2) as columns, for investments and fixed_plans."""
    p, c = field_prefix, column_prefix
    return {
        f"{c}ticker": _text(f"{p}ticker", get("ticker"), TICKER_PATTERN, TICKER_FORM),
        **_status(f"{p}status", get("status"), schemas.PLAN_STATUS_LABELS, f"{c}status"),
        f"{c}percent": _decimal(f"{p}percent", get("percent")),
        f"{c}duration_minutes": _integer(f"{p}duration", get("duration")),
        f"{c}interest_ticker": _text(
            f"{p}interestTicker", get("interestTicker"), TICKER_PATTERN, TICKER_FORM
        ),
        f"{c}interest_ratio": _decimal(f"{p}interestRatio", get("interestRatio")),
        f"{c}min_investment": _decimal(f"{p}minInvestment", get("minInvestment")),
        f"{c}max_investment": _decimal(f"{p}maxInvestment", get("maxInvestment")),
        f"{c}max_possible_investment": _decimal(
            f"{p}maxPossibleInvestment", get("maxPossibleInvestment")
        ),
    }


def _normalize_balances(
    schema: TableSchema,
    balances: object,
    fields: Mapping[str, str],
    snapshot_date: date,
    extracted_at: datetime,
) -> Batch:
    extracted_at = _utc(extracted_at)
    if isinstance(balances, dict):
        raw: dict[int, object] = {}
        intake = _Intake([], [], raw, len(balances))
        tickers: list[object] = []
        for position, (ticker, balance) in enumerate(balances.items()):
            raw[position] = {ticker: balance}
            if intake._take(position, balance, f"balance of {ticker!r}"):
                tickers.append(ticker)
    else:
        intake = _Intake([], [], {0: balances}, 1, [(0, "expected a JSON object keyed by ticker")])
        tickers = []
    columns = {"ticker": _text("ticker", tickers, TICKER_PATTERN, TICKER_FORM)}
    columns |= {column: _decimal(name, intake.values(name)) for column, name in fields.items()}
    return _assemble(
        schema,
        intake,
        columns,
        extracted_at=_utc(extracted_at),
        snapshot_date=snapshot_date,
        home_partition=snapshot_date,
    )


# --- Assembly: valid rows, duplicates, rejects -------------------------------------------------


def _assemble(
    schema: TableSchema,
    intake: _Intake,
    columns: Mapping[str, _Converted],
    *,
    extracted_at: datetime,
    reject_partition: pa.Array | None = None,
    home_partition: date,
    snapshot_date: date | None = None,
) -> Batch:
    length = len(intake)
    constants: dict[str, pa.Array] = {
        "extracted_at": pa.repeat(pa.scalar(extracted_at, schemas.UTC_TIME), length)
    }
    if snapshot_date is not None:
        constants["snapshot_date"] = pa.repeat(pa.scalar(snapshot_date, schemas.DAY), length)
    arrays = {name: converted.values for name, converted in columns.items()} | constants
    unknown = set(arrays) ^ {c.name for c in schema.columns}
    if unknown:
        raise AssertionError(f"{schema.name}: columns built do not match the schema: {unknown}")

    field_reasons = [c.reasons for c in columns.values()]
    invalid = pa.repeat(pa.scalar(False), length)
    for reason in field_reasons:
        if reason.null_count < length:
            invalid = pc.or_(invalid, pc.is_valid(reason))
    loose = pa.schema([pa.field(c.name, c.type) for c in schema.columns])
    candidates = pa.Table.from_arrays([arrays[c.name] for c in schema.columns], schema=loose)
    positions = pa.array(np.asarray(intake.indices, dtype=np.int64))

    rejected: list[tuple[int, str, str]] = [
        (position, home_partition.isoformat(), reason) for position, reason in intake.early_rejects
    ]
    rows, row_positions = candidates, positions
    if pc.any(invalid).as_py():
        partitions = reject_partition
        if partitions is None:
            partitions = pa.repeat(pa.scalar(home_partition.isoformat()), length)
        rejected += zip(
            positions.filter(invalid).to_pylist(),
            partitions.filter(invalid).to_pylist(),
            _join_reasons([r.filter(invalid) for r in field_reasons]).to_pylist(),
            strict=True,
        )
        valid = pc.invert(invalid)
        rows, row_positions = candidates.filter(valid), positions.filter(valid)

    keep, duplicates, conflicts = _resolve_duplicate_keys(schema, rows, row_positions, intake)
    if keep is not None:
        rows = rows.filter(keep)
    rejected += conflicts
    return Batch(
        table=schema.name,
        rows=rows.cast(schema.arrow_schema),
        rejects=_rejects_table(schema.name, rejected, intake, extracted_at),
        received=intake.received,
        duplicates=intake.duplicates + duplicates,
        covers=(home_partition,),
    )


def _join_reasons(reasons: Sequence[pa.Array]) -> pa.Array:
    """Every failing field's reason, '; '-joined; null when the record is valid."""
    # pyarrow's binary_join_element_wise(null_handling="skip") loses trailing all-null rows.
    joined = pa.nulls(len(reasons[0]), pa.string())
    for reason in reasons:
        both = pc.binary_join_element_wise(joined, reason, "; ")
        joined = pc.if_else(
            pc.is_null(joined), reason, pc.if_else(pc.is_null(reason), joined, both)
        )
    return joined


def _resolve_duplicate_keys(
    schema: TableSchema, rows: pa.Table, positions: pa.Array, intake: _Intake
) -> tuple[pa.Array | None, int, list[tuple[int, str, str]]]:
    """Rows to keep, identical copies dropped, and conflicting records to reject."""
    key = list(schema.key)
    if rows.num_rows < 2:
        return None, 0, []
    if not has_equal_keys(rows.select(key)):
        return None, 0, []
    keyed = rows.select(key).append_column("_position", positions)
    partition_column = schema.partition_column
    aggregates = [("_position", "list")]
    if partition_column not in key:
        keyed = keyed.append_column(partition_column, rows[partition_column])
        aggregates.append((partition_column, "min"))
    groups = keyed.group_by(key).aggregate(aggregates)
    groups = groups.filter(pc.greater(pc.list_value_length(groups["_position_list"]), 1))
    dropped: set[int] = set()
    duplicates = 0
    conflicts: list[tuple[int, str, str]] = []
    for group in groups.to_pylist():
        members: list[int] = sorted(group["_position_list"])
        contents = {_canonical_json(intake.raw[m]) for m in members}
        if len(contents) == 1:
            dropped.update(members[1:])
            duplicates += len(members) - 1
            continue
        described = ", ".join(f"{k}={group[k]}" for k in key if k != partition_column)
        reason = f"duplicate key ({described}): {len(members)} records in this batch differ"
        day = group.get(partition_column, group.get(f"{partition_column}_min"))
        partition = day.isoformat() if isinstance(day, date) else str(day)
        dropped.update(members)
        conflicts += [(m, partition, reason) for m in members]
    keep = pc.invert(pc.is_in(positions, value_set=pa.array(sorted(dropped), pa.int64())))
    return keep, duplicates, conflicts


def has_equal_keys(keys: pa.Table) -> bool:
    """Whether two rows share a key: sort, then compare neighbours (cheaper than hashing)."""
    ordered = keys.take(
        pc.sort_indices(keys, sort_keys=[(k, "ascending") for k in keys.column_names])
    )
    return has_equal_neighbours(ordered)


def has_equal_neighbours(ordered: pa.Table) -> bool:
    """Whether two neighbouring rows are equal: on rows sorted by all their columns, whether
    two rows are."""
    length = ordered.num_rows
    same: pa.ChunkedArray | None = None
    for name in ordered.column_names:
        column = ordered[name]
        equal = pc.equal(column.slice(0, length - 1), column.slice(1))
        same = equal if same is None else pc.and_(same, equal)
    return bool(same is not None and pc.any(same).as_py())


def _rejects_table(
    table: str, rejected: list[tuple[int, str, str]], intake: _Intake, extracted_at: datetime
) -> pa.Table:
    rejected.sort()
    return pa.Table.from_pydict(
        {
            "table": [table] * len(rejected),
            "partition": [partition for _, partition, _ in rejected],
            "record_index": [position for position, _, _ in rejected],
            "raw_json": [_raw_json(intake.raw[position]) for position, _, _ in rejected],
            "reason": [intake.context.get(p, "") + reason for p, _, reason in rejected],
            "extracted_at": [extracted_at] * len(rejected),
        },
        schema=schemas.REJECTS_TABLE.arrow_schema,
    )


def _raw_json(value: object) -> str:
    """The record as JSON text; the stdlib keeps NaN and big integers as they were parsed."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=repr)
    try:
        text.encode()
    except UnicodeEncodeError:  # a lone surrogate: kept, as its JSON escape
        text = json.dumps(value, ensure_ascii=True, separators=(",", ":"), default=repr)
    return text


def _canonical_json(value: object) -> str:
    return json.dumps(
        value, ensure_ascii=False, separators=(",", ":"), sort_keys=True, default=repr
    )


def _utc(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        raise ValueError(f"extracted_at must be timezone-aware (UTC), got naive {moment!r}")
    return moment.astimezone(UTC)
