"""The warehouse contract: one declared schema per table, the only place a table's shape is written.

Each `TableSchema` names its columns (Arrow type, nullability, a one-line description), its Hive
partition columns (or the month of one, for a table whose days are small) and its key.
Normalization builds tables in this shape, the Parquet layer checks them against it, the DuckDB
catalog derives its views and column comments from it, and `whitebit-etl tables` prints it as
the data dictionary.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date
from typing import Final

import pyarrow as pa

#: Money and rates: 20 integer digits and 18 fraction digits, exactly.
MONEY: Final = pa.decimal128(38, 18)
#: Every instant, in UTC, to the microsecond.
UTC_TIME: Final = pa.timestamp("us", tz="UTC")
#: Partition days.
DAY: Final = pa.date32()
TEXT: Final = pa.string()
TEXT_LIST: Final = pa.list_(pa.string())

#: Labels of the integer statuses (the API contract, docs/api.md, section 3); a status outside
#: these is a reject.
INVESTMENT_STATUS_LABELS: Final[Mapping[int, str]] = {1: "active", 2: "closed"}
PLAN_STATUS_LABELS: Final[Mapping[int, str]] = {
    1: "active",
    2: "no coins left",
    3: "inactive",
    4: "pause",
}

#: ``position_side`` of a funding payment, derived from the sign of ``position_amount``.
LONG: Final = "long"
SHORT: Final = "short"

REJECTS: Final = "_rejects"

#: The column every table has first: whose rows these are. It is a path segment of every partition
#: (``account=main/``), never stored inside a file, and a name of `accounts.yaml` (the
#: application's): letters, digits and ``_``, starting with a letter.
ACCOUNT: Final = "account"
ACCOUNT_NAME: Final = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
#: The one account of a warehouse configured without an accounts file.
DEFAULT_ACCOUNT: Final = "default"


@dataclass(frozen=True, slots=True)
class Column:
    """One column: its name, Arrow type, whether it may be null, and what it means."""

    name: str
    type: pa.DataType
    nullable: bool
    description: str

    @property
    def arrow_field(self) -> pa.Field:
        return pa.field(self.name, self.type, nullable=self.nullable)


@dataclass(frozen=True, slots=True)
class TableSchema:
    """A warehouse table: columns in order, Hive partition columns, and the key of one row.

    Every table is also partitioned by `ACCOUNT`, first, in its path: ``columns``,
    ``partition_columns`` and ``key`` are those of one account's rows, `view_columns` and
    `path_columns` those of the table across accounts.
    """

    name: str
    description: str
    columns: tuple[Column, ...]
    partition_columns: tuple[str, ...]
    #: Columns that identify a row; unique within the table. Empty for ``_rejects``.
    key: tuple[str, ...]
    #: Set for a table whose days are too small to be files of their own: a file then holds a
    #: calendar month of the (one, DAY) partition column, which stays in the file, and the path
    #: names the month under this name (``funding_month=2025-03``).
    month_path: str | None = None
    columns_by_name: Mapping[str, Column] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_name = {c.name: c for c in self.columns}
        if len(by_name) != len(self.columns):
            raise ValueError(f"table {self.name}: a column name appears twice")
        missing = [c for c in (*self.partition_columns, *self.key) if c not in by_name]
        if missing:
            raise ValueError(f"table {self.name}: partition or key names unknown columns {missing}")
        if ACCOUNT in by_name:
            raise ValueError(f"table {self.name}: {ACCOUNT!r} is the path's, not a column's name")
        if self.month_path and (
            len(self.partition_columns) != 1 or by_name[self.partition_columns[0]].type != DAY
        ):
            raise ValueError(f"table {self.name}: a month partition needs one DAY partition column")
        object.__setattr__(self, "columns_by_name", by_name)

    @property
    def partition_column(self) -> str:
        """The partition column of a table partitioned by exactly one column."""
        if len(self.partition_columns) != 1:
            columns = list(self.partition_columns)
            raise ValueError(f"table {self.name} is partitioned by {columns}, not by one column")
        return self.partition_columns[0]

    @property
    def path_columns(self) -> tuple[str, ...]:
        """The names a partition's path holds: the account, then ``month_path``, else the
        partition columns."""
        return (ACCOUNT, *((self.month_path,) if self.month_path else self.partition_columns))

    @property
    def view_columns(self) -> tuple[Column, ...]:
        """The columns of the table's view: the account, then the rows' own."""
        return (ACCOUNT_COLUMN, *self.columns)

    @property
    def arrow_schema(self) -> pa.Schema:
        """All columns, partition columns included, as normalization produces them."""
        return pa.schema([c.arrow_field for c in self.columns])

    @property
    def file_schema(self) -> pa.Schema:
        """The columns stored inside a Parquet file: a partition value in the path is not."""
        return pa.schema([c.arrow_field for c in self.columns if c.name not in self.path_columns])

    def column(self, name: str) -> Column:
        return self.columns_by_name[name]


ACCOUNT_COLUMN: Final = Column(
    ACCOUNT, TEXT, False, "Account the row belongs to: its name in the accounts file (partition)"
)


def _extracted_at() -> Column:
    return Column("extracted_at", UTC_TIME, False, "When the run that wrote this row fetched it")


def _snapshot_date() -> Column:
    return Column("snapshot_date", DAY, False, "UTC day of the snapshot (partition)")


def _money(name: str, description: str, *, nullable: bool = False) -> Column:
    return Column(name, MONEY, nullable, description)


FUNDING_HISTORY: Final = TableSchema(
    name="funding_history",
    description="One row per funding payment of the collateral account",
    columns=(
        Column("market", TEXT, False, "Perpetual market, <BASE>_PERP"),
        Column("funding_time", UTC_TIME, False, "When the funding was applied"),
        Column(
            "position_side",
            TEXT,
            False,
            "'long' when position_amount >= 0, else 'short' (derived; a zero position is 'long')",
        ),
        _money("funding_rate", "Funding rate"),
        _money("funding_amount", "Funding amount; may be negative"),
        _money("position_amount", "Position size; negative when short"),
        _money("settlement_price", "Settlement price"),
        Column("rate_calculated_time", UTC_TIME, False, "When the funding rate was calculated"),
        Column("funding_date", DAY, False, "UTC day of funding_time (a file holds a month)"),
        _extracted_at(),
    ),
    partition_columns=("funding_date",),
    # Hedge mode funds a long and a short of one market at the same instant.
    key=("market", "funding_time", "position_side"),
    # A few hundred payments a day: a file a day would be thousands of tiny files.
    month_path="funding_month",
)

_PLAN_DESCRIPTIONS: Final = {
    "ticker": "Source currency ticker",
    "status": "Plan status: 1 active, 2 no coins left, 3 inactive, 4 pause",
    "status_label": "Label of the plan status",
    "percent": "Interest percent",
    "duration_minutes": "Investment duration in minutes",
    "interest_ticker": "Target (interest) currency ticker",
    "interest_ratio": "Ratio of target currency to source currency",
    "min_investment": "Minimum investment amount",
    "max_investment": "Maximum investment amount",
    "max_possible_investment": "Maximum investment amount under the plan's current state",
}


def _plan_columns(prefix: str) -> tuple[Column, ...]:
    d = _PLAN_DESCRIPTIONS
    return (
        Column(f"{prefix}ticker", TEXT, False, d["ticker"]),
        Column(f"{prefix}status", pa.int64(), False, d["status"]),
        Column(f"{prefix}status_label", TEXT, False, d["status_label"]),
        _money(f"{prefix}percent", d["percent"]),
        Column(f"{prefix}duration_minutes", pa.int64(), False, d["duration_minutes"]),
        Column(f"{prefix}interest_ticker", TEXT, False, d["interest_ticker"]),
        _money(f"{prefix}interest_ratio", d["interest_ratio"]),
        _money(f"{prefix}min_investment", d["min_investment"]),
        _money(f"{prefix}max_investment", d["max_investment"]),
        _money(f"{prefix}max_possible_investment", d["max_possible_investment"]),
    )


INVESTMENTS: Final = TableSchema(
    name="investments",
    description="One row per fixed-term investment as seen on the snapshot day, plan flattened",
    columns=(
        Column("investment_id", TEXT, False, "Investment identifier"),
        Column("status", pa.int64(), False, "Investment status: 1 active, 2 closed"),
        Column("status_label", TEXT, False, "Label of the investment status"),
        Column("created", UTC_TIME, False, "When the investment was created"),
        Column("updated", UTC_TIME, False, "When the investment was last updated"),
        Column("payment_time", UTC_TIME, False, "Payment time of the investment"),
        _money("amount", "Investment amount, in plan_ticker"),
        _money("interest_paid", "Interest paid so far"),
        Column("plan_id", TEXT, False, "Invest plan identifier"),
        *_plan_columns("plan_"),
        _snapshot_date(),
        _extracted_at(),
    ),
    partition_columns=("snapshot_date",),
    key=("snapshot_date", "investment_id"),
)

FIXED_PLANS: Final = TableSchema(
    name="fixed_plans",
    description="One row per invest plan referenced by an investment on the snapshot day",
    columns=(
        Column("plan_id", TEXT, False, "Invest plan identifier"),
        *_plan_columns(""),
        _snapshot_date(),
        _extracted_at(),
    ),
    partition_columns=("snapshot_date",),
    key=("snapshot_date", "plan_id"),
)

MAIN_BALANCES: Final = TableSchema(
    name="main_balances",
    description="One row per asset the main-account balance lists, zero balances included",
    columns=(
        Column("ticker", TEXT, False, "Asset ticker"),
        _money("main_balance", "Main-account balance"),
        _snapshot_date(),
        _extracted_at(),
    ),
    partition_columns=("snapshot_date",),
    key=("snapshot_date", "ticker"),
)

TRADING_BALANCES: Final = TableSchema(
    name="trading_balances",
    description="One row per asset of the trading account (the API lists non-zero ones)",
    columns=(
        Column("ticker", TEXT, False, "Asset ticker"),
        _money("available", "Amount available for trading"),
        # The API's "freeze"; renamed because FREEZE is a reserved word in DuckDB's SQL.
        _money("frozen", "Amount frozen in open orders (the API's 'freeze')"),
        _snapshot_date(),
        _extracted_at(),
    ),
    partition_columns=("snapshot_date",),
    key=("snapshot_date", "ticker"),
)

HEDGE_MODE: Final = TableSchema(
    name="hedge_mode",
    description="One row per snapshot: whether hedge mode is on for the collateral account",
    columns=(
        Column("hedge_mode", pa.bool_(), False, "Hedge mode is on"),
        _snapshot_date(),
        _extracted_at(),
    ),
    partition_columns=("snapshot_date",),
    key=("snapshot_date",),
)

WATCHER_LINKS: Final = TableSchema(
    name="watcher_links",
    description="One row per watcher link of each mining-pool account asked for",
    columns=(
        Column("mining_account", TEXT, False, "Mining-pool account whose links were listed"),
        Column("link_id", TEXT, False, "Watcher link identifier"),
        Column("accounts", TEXT_LIST, False, "Mining accounts the link covers"),
        Column("name", TEXT, False, "Link name"),
        Column("link", TEXT, False, "Full URL of the link"),
        Column("permissions", TEXT_LIST, False, "Permissions the link grants"),
        Column("live_until", UTC_TIME, True, "When the link expires; null: never"),
        Column("created_at", UTC_TIME, False, "When the link was created"),
        _snapshot_date(),
        _extracted_at(),
    ),
    partition_columns=("snapshot_date",),
    key=("snapshot_date", "mining_account", "link_id"),
)

REJECTS_TABLE: Final = TableSchema(
    name=REJECTS,
    description="One row per raw record that failed normalization, with the reason",
    columns=(
        Column("table", TEXT, False, "Table the record was meant for (partition)"),
        Column(
            "partition", TEXT, False, "UTC day of that table the record was meant for (partition)"
        ),
        Column("record_index", pa.int64(), False, "Position of the record in its input batch"),
        Column(
            "raw_json",
            TEXT,
            False,
            "The record as received, as JSON text: every value exact",
        ),
        Column("reason", TEXT, False, "Why it was rejected: field and rule, '; '-separated"),
        _extracted_at(),
    ),
    partition_columns=("table", "partition"),
    key=(),
)


def month_of(day: date) -> str:
    """The month holding ``day``, as a month path names it: ``2025-03``."""
    return f"{day.year:04d}-{day.month:02d}"


def month_days(month: str) -> tuple[date, date]:
    """The first day of a month (``2025-03``) and the first day of the next."""
    first = date.fromisoformat(f"{month}-01")
    following = date(first.year + first.month // 12, first.month % 12 + 1, 1)
    return first, following


TABLES: Final[Mapping[str, TableSchema]] = {
    t.name: t
    for t in (
        FUNDING_HISTORY,
        INVESTMENTS,
        FIXED_PLANS,
        MAIN_BALANCES,
        TRADING_BALANCES,
        HEDGE_MODE,
        WATCHER_LINKS,
        REJECTS_TABLE,
    )
}
