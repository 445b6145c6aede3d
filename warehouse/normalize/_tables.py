"""One function per kind of raw input: which field of the API's records goes through which
converter into which column of which table."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, date, datetime
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc

from warehouse import schemas
from warehouse.normalize._assemble import Batch, InvestmentBatches, assemble
from warehouse.normalize._convert import (
    Converted,
    TimeBounds,
    as_read,
    decimal,
    integer,
    status,
    text,
    timestamp,
)
from warehouse.normalize._intake import (
    BOOLEAN,
    DECIMAL_STRING,
    INTEGER,
    SECONDS_STRING,
    STRING,
    STRINGS,
    UNIX_TIME,
    Expected,
    Field,
    Intake,
    read,
)
from warehouse.schemas import TableSchema

#: Every field of a funding history entry (the API contract, docs/api.md, section 2.3), in the
#: contract's order: all strings.
FUNDING_FIELDS: Final[Mapping[str, Expected]] = {
    "market": STRING,
    "fundingTime": SECONDS_STRING,
    "fundingRate": DECIMAL_STRING,
    "fundingAmount": DECIMAL_STRING,
    "positionAmount": DECIMAL_STRING,
    "settlementPrice": DECIMAL_STRING,
    "rateCalculatedTime": SECONDS_STRING,
}
#: Perpetual market names, ``<BASE>_PERP`` (docs/api.md, section 2.3).
PERP_MARKET_PATTERN: Final = r"^[A-Z0-9]{1,20}_PERP$"
#: An asset ticker: 1-32 letters, digits, '_', '.', '-', starting with a letter or digit.
TICKER_PATTERN: Final = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$"
TICKER_FORM: Final = "a ticker (1-32 letters, digits, '_', '.', '-', not starting with a symbol)"
#: Mining-pool account names are at most 255 characters (docs/api.md, section 4.7).
ACCOUNT_MAX_LENGTH: Final = 255


def normalize_funding_history(
    records: object, *, extracted_at: datetime, partition_for_rejects: date
) -> Batch:
    """Funding history entries (docs/api.md, section 2.3) -> ``funding_history`` rows.

    ``records`` is the JSON array as parsed.

    ``funding_date`` is the UTC day of each record's own ``fundingTime``, so a batch may span
    days. A record whose time cannot be read is rejected into the day of the record before it
    in the batch, or into ``partition_for_rejects`` (the day the caller was reading) when no
    record before it has a readable time.
    """
    extracted_at = _utc(extracted_at)
    intake = Intake.of_array(records, "funding history entries")
    past = TimeBounds.past(extracted_at)
    field = intake.strings(FUNDING_FIELDS)
    funding_time = timestamp(field["fundingTime"], past)
    position_amount = decimal(field["positionAmount"])
    zero = pa.scalar(0, schemas.MONEY)
    side = pc.if_else(pc.greater_equal(position_amount.values, zero), schemas.LONG, schemas.SHORT)
    funding_date = pc.cast(funding_time.values, schemas.DAY)
    columns = {
        "market": text(field["market"], PERP_MARKET_PATTERN, "of the form <BASE>_PERP"),
        "funding_time": funding_time,
        "position_side": Converted.valid(side),
        "funding_rate": decimal(field["fundingRate"]),
        "funding_amount": decimal(field["fundingAmount"]),
        "position_amount": position_amount,
        "settlement_price": decimal(field["settlementPrice"]),
        "rate_calculated_time": timestamp(field["rateCalculatedTime"], past),
        "funding_date": Converted.valid(funding_date),
    }
    # The API lists newest first: a record whose time cannot be read belongs with the record
    # before it, so every rerun of that day rejects it into that day again.
    neighbour_day = pc.fill_null_forward(pc.cast(funding_date, pa.string()))
    reject_partition = pc.coalesce(neighbour_day, pa.scalar(partition_for_rejects.isoformat()))
    return assemble(
        schemas.FUNDING_HISTORY,
        intake,
        columns,
        extracted_at=extracted_at,
        reject_partition=reject_partition,
        home_partition=partition_for_rejects,
    )


def normalize_investments(
    records: object, *, snapshot_date: date, extracted_at: datetime
) -> InvestmentBatches:
    """Investments (docs/api.md, section 2.1) -> ``investments`` rows and their distinct
    ``fixed_plans``.

    The nested plan is flattened into ``plan_*`` columns and also normalized on its own into
    ``fixed_plans`` (one row per plan id; a plan object seen with two contents is rejected).
    """
    extracted_at = _utc(extracted_at)
    intake = Intake.of_array(records, "investments").require_object("plan")
    past = TimeBounds.past(extracted_at)
    field = intake.field

    def plan_field(name: str, expected: Expected) -> Field:
        return intake.field("plan", name, expected=expected)

    columns = {
        "investment_id": text(field("id", expected=STRING)),
        **status(field("status", expected=INTEGER), schemas.INVESTMENT_STATUS_LABELS, "status"),
        "created": timestamp(field("created", expected=UNIX_TIME), past),
        "updated": timestamp(field("updated", expected=UNIX_TIME), past),
        "payment_time": timestamp(field("paymentTime", expected=UNIX_TIME), TimeBounds.scheduled()),
        "amount": decimal(field("amount", expected=DECIMAL_STRING)),
        "interest_paid": decimal(field("interestPaid", expected=DECIMAL_STRING)),
        "plan_id": text(plan_field("id", STRING)),
        **_plan_columns(plan_field, "plan_"),
    }
    investments = assemble(
        schemas.INVESTMENTS,
        intake,
        columns,
        extracted_at=extracted_at,
        snapshot_date=snapshot_date,
        home_partition=snapshot_date,
    )

    plans = Intake.of_nested_objects(records, "plan")

    def own_field(name: str, expected: Expected) -> Field:
        return plans.field(name, expected=expected)

    plan_columns = {"plan_id": text(own_field("id", STRING)), **_plan_columns(own_field, "")}
    fixed_plans = assemble(
        schemas.FIXED_PLANS,
        plans,
        plan_columns,
        extracted_at=extracted_at,
        snapshot_date=snapshot_date,
        home_partition=snapshot_date,
    )
    return InvestmentBatches(investments, fixed_plans)


def _plan_columns(
    field: Callable[[str, Expected], Field], column_prefix: str
) -> dict[str, Converted]:
    """A FixedPlan object's fields (docs/api.md, section 2.2) as columns, for investments and
    fixed_plans."""
    c = column_prefix
    return {
        f"{c}ticker": text(field("ticker", STRING), TICKER_PATTERN, TICKER_FORM),
        **status(field("status", INTEGER), schemas.PLAN_STATUS_LABELS, f"{c}status"),
        f"{c}percent": decimal(field("percent", DECIMAL_STRING)),
        f"{c}duration_minutes": integer(field("duration", INTEGER)),
        f"{c}interest_ticker": text(field("interestTicker", STRING), TICKER_PATTERN, TICKER_FORM),
        f"{c}interest_ratio": decimal(field("interestRatio", DECIMAL_STRING)),
        f"{c}min_investment": decimal(field("minInvestment", DECIMAL_STRING)),
        f"{c}max_investment": decimal(field("maxInvestment", DECIMAL_STRING)),
        f"{c}max_possible_investment": decimal(field("maxPossibleInvestment", DECIMAL_STRING)),
    }


def normalize_main_balances(
    balances: object, *, snapshot_date: date, extracted_at: datetime
) -> Batch:
    """Main balance ``{ticker: {"main_balance": str}}`` (docs/api.md, section 2.4) -> one row
    per ticker.

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


def _normalize_balances(
    schema: TableSchema,
    balances: object,
    fields: Mapping[str, str],
    snapshot_date: date,
    extracted_at: datetime,
) -> Batch:
    extracted_at = _utc(extracted_at)
    intake = Intake.of_objects_by_key(balances, "balance", key="ticker")
    columns = {"ticker": text(intake.owner_field("ticker", STRING), TICKER_PATTERN, TICKER_FORM)}
    columns |= {
        column: decimal(intake.field(name, expected=DECIMAL_STRING))
        for column, name in fields.items()
    }
    return assemble(
        schema,
        intake,
        columns,
        extracted_at=extracted_at,
        snapshot_date=snapshot_date,
        home_partition=snapshot_date,
    )


def normalize_hedge_mode(status: object, *, snapshot_date: date, extracted_at: datetime) -> Batch:
    """Hedge-mode status ``{"hedgeMode": bool}`` (docs/api.md, section 2.6) -> one row."""
    extracted_at = _utc(extracted_at)
    intake = Intake.of_single_object(status, "hedge-mode status")
    return assemble(
        schemas.HEDGE_MODE,
        intake,
        {"hedge_mode": as_read(intake.field("hedgeMode", expected=BOOLEAN))},
        extracted_at=extracted_at,
        snapshot_date=snapshot_date,
        home_partition=snapshot_date,
    )


def normalize_watcher_links(
    links_by_account: Mapping[str, object], *, snapshot_date: date, extracted_at: datetime
) -> Batch:
    """Watcher links (docs/api.md, section 2.5) of each mining account -> one row per
    (account, link).

    All accounts go in one call because they share the snapshot's partition.
    """
    extracted_at = _utc(extracted_at)
    for account in links_by_account:
        if not isinstance(account, str) or not 0 < len(account) <= ACCOUNT_MAX_LENGTH:
            raise ValueError(
                f"watcher links: mining account must be 1-{ACCOUNT_MAX_LENGTH} characters, "
                f"got {account!r}"
            )
    intake = Intake.of_arrays_by_owner(links_by_account, "watcher links", owner="account")
    field = intake.field
    columns = {
        "mining_account": as_read(intake.owner_field("account", STRING)),
        "link_id": text(field("id", expected=STRING)),
        "accounts": as_read(field("accounts", expected=STRINGS)),
        "name": text(field("name", expected=STRING), allow_empty=True),
        "link": text(field("link", expected=STRING)),
        "permissions": as_read(field("permissions", expected=STRINGS)),
        "live_until": timestamp(
            field("liveUntil", expected=UNIX_TIME, nullable=True), TimeBounds.scheduled()
        ),
        "created_at": timestamp(
            field("createdAt", expected=UNIX_TIME), TimeBounds.past(extracted_at)
        ),
    }
    return assemble(
        schemas.WATCHER_LINKS,
        intake,
        columns,
        extracted_at=extracted_at,
        snapshot_date=snapshot_date,
        home_partition=snapshot_date,
    )


def parse_decimals(values: Sequence[object], field: str = "value") -> tuple[pa.Array, pa.Array]:
    """Decimal strings -> ``decimal128(38, 18)`` by the package's rules, vectorized.

    Returns the typed values (null where rejected) and, per value, the reason it was rejected
    (null where accepted).
    """
    converted = decimal(read(field, values, DECIMAL_STRING))
    return converted.values, converted.reasons


def _utc(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        raise ValueError(f"extracted_at must be timezone-aware (UTC), got naive {moment!r}")
    return moment.astimezone(UTC)
