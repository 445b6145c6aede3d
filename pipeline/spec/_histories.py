"""The account's histories and snapshots the product extracts, each declared once.

Adding one is a `History` here (its operation in `_operations`, and what its records do to the
holdings, its `flows`), its data in the simulator, and its tests: the walk, the table, the
catalog's view, its rows of the account's money, the Dagster asset, its checks and the report's
counts follow from the declaration.
"""

from __future__ import annotations

from typing import Final

from ._history import (
    OWNER,
    SNAPSHOT,
    Change,
    Column,
    Fanout,
    Flow,
    History,
    Monthly,
    NewestFirst,
    OffsetWindow,
)
from ._history import Split as Split
from ._operations import (
    FUNDING_HISTORY,
    HEDGE_MODE,
    INVESTMENT_STATUSES,
    INVESTMENTS_HISTORY,
    MAIN_BALANCE,
    PLAN_STATUSES,
    TRADING_BALANCE,
    WATCHER_LINKS,
)

#: Perpetual market names, ``<BASE>_PERP`` (docs/api.md, section 2.3).
PERP_MARKET: Final = r"^[A-Z0-9]{1,20}_PERP$"
#: An asset ticker: 1-32 letters, digits, '_', '.', '-', starting with a letter or digit.
TICKER: Final = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$"
TICKER_FORM: Final = "a ticker (1-32 letters, digits, '_', '.', '-', not starting with a symbol)"
#: Perpetual markets (``<BASE>_PERP``) are margined and settled in this ticker: their fees,
#: realized P&L and funding move the collateral balance of it.
SETTLEMENT_TICKER: Final = "USDT"
#: The settlement ticker as SQL, for a flow's ``ticker``.
SETTLED_IN: Final = f"'{SETTLEMENT_TICKER}'"


def _ticker(name: str, description: str, *source: str) -> Column:
    return Column(name, description, source or OWNER, pattern=TICKER, form=TICKER_FORM)


FUNDING: Final = History(
    name="funding_history",
    description="One row per funding payment of the collateral account",
    operation=FUNDING_HISTORY,
    columns=(
        Column(
            "market",
            "Perpetual market, <BASE>_PERP",
            ("market",),
            pattern=PERP_MARKET,
            form="of the form <BASE>_PERP",
        ),
        Column("funding_time", "When the funding was applied", ("fundingTime",)),
        Column(
            "position_side",
            "'long' when position_amount >= 0, else 'short' (derived; a zero position is 'long')",
            sign_of="position_amount",
        ),
        Column("funding_rate", "Funding rate", ("fundingRate",)),
        Column("funding_amount", "Funding amount; may be negative", ("fundingAmount",)),
        Column("position_amount", "Position size; negative when short", ("positionAmount",)),
        Column("settlement_price", "Settlement price", ("settlementPrice",)),
        Column(
            "rate_calculated_time", "When the funding rate was calculated", ("rateCalculatedTime",)
        ),
        Column(
            "funding_date", "UTC day of funding_time (a file holds a month)", day_of="funding_time"
        ),
    ),
    # Hedge mode funds a long and a short of one market at the same instant.
    key=("market", "funding_time", "position_side"),
    # Applied at the second it names: a snapshot of that second shows it.
    flows=(Flow("funding", SETTLED_IN, "funding_amount", "exact"),),
    # A few hundred payments a day: a file a day would be thousands of tiny files.
    partition=Monthly(time="funding_time", day="funding_date", month_path="funding_month"),
    paging=NewestFirst(
        time="fundingTime",
        key=("market", "fundingTime"),
        side="positionAmount",
        split_param="market",
        split_setting="markets",
    ),
)


def _plan_columns(prefix: str, *path: str) -> tuple[Column, ...]:
    """A FixedPlan's fields (docs/api.md, section 2.2) as columns: of an investment's plan
    (``plan_`` columns) or of the plan itself."""
    at = tuple(path)
    return (
        _ticker(f"{prefix}ticker", "Source currency ticker", *at, "ticker"),
        Column(
            f"{prefix}status",
            "Plan status: 1 active, 2 no coins left, 3 inactive, 4 pause",
            (*at, "status"),
            labels=PLAN_STATUSES,
        ),
        Column(f"{prefix}percent", "Interest percent", (*at, "percent")),
        Column(f"{prefix}duration_minutes", "Investment duration in minutes", (*at, "duration")),
        _ticker(
            f"{prefix}interest_ticker", "Target (interest) currency ticker", *at, "interestTicker"
        ),
        Column(
            f"{prefix}interest_ratio",
            "Ratio of target currency to source currency",
            (*at, "interestRatio"),
        ),
        Column(f"{prefix}min_investment", "Minimum investment amount", (*at, "minInvestment")),
        Column(f"{prefix}max_investment", "Maximum investment amount", (*at, "maxInvestment")),
        Column(
            f"{prefix}max_possible_investment",
            "Maximum investment amount under the plan's current state",
            (*at, "maxPossibleInvestment"),
        ),
    )


INVESTMENTS: Final = History(
    name="investments",
    description="One row per fixed-term investment as seen on the snapshot day, plan flattened",
    operation=INVESTMENTS_HISTORY,
    columns=(
        Column("investment_id", "Investment identifier", ("id",)),
        Column(
            "status",
            "Investment status: 1 active, 2 closed",
            ("status",),
            labels=INVESTMENT_STATUSES,
        ),
        Column("created", "When the investment was created", ("created",)),
        Column("updated", "When the investment was last updated", ("updated",)),
        Column("payment_time", "Payment time of the investment", ("paymentTime",), scheduled=True),
        Column("amount", "Investment amount, in plan_ticker", ("amount",)),
        Column("interest_paid", "Interest paid so far", ("interestPaid",)),
        Column("plan_id", "Invest plan identifier", ("plan", "id")),
        *_plan_columns("plan_", "plan"),
    ),
    key=("investment_id",),
    partition=SNAPSHOT,
    # The principal is in the holdings (the statement's); the interest is paid as it accrues.
    flows=(Change("interest", ticker="plan_interest_ticker", total="interest_paid"),),
    paging=OffsetWindow(
        # Each status is a slice; one that fills the window is split by ticker: those seen in
        # its plans, and those of the main balance.
        splits=(Split("status"), Split("ticker", seen=("plan", "ticker"), listed_by=MAIN_BALANCE)),
        identity="id",
    ),
    access="investments",
)

FIXED_PLANS: Final = History(
    name="fixed_plans",
    description="One row per invest plan referenced by an investment on the snapshot day",
    operation=INVESTMENTS_HISTORY,
    columns=(Column("plan_id", "Invest plan identifier", ("id",)), *_plan_columns("")),
    key=("plan_id",),
    partition=SNAPSHOT,
    flows=(),
    nested_in=INVESTMENTS,
    nested_at="plan",
    access="investments",
)

MAIN_BALANCES: Final = History(
    name="main_balances",
    description="One row per asset the main-account balance lists, zero balances included",
    operation=MAIN_BALANCE,
    columns=(
        _ticker("ticker", "Asset ticker"),
        Column("main_balance", "Main-account balance", ("main_balance",)),
    ),
    key=("ticker",),
    partition=SNAPSHOT,
    flows=(),
)

TRADING_BALANCES: Final = History(
    name="trading_balances",
    description="One row per asset of the trading account (the API lists non-zero ones)",
    operation=TRADING_BALANCE,
    columns=(
        _ticker("ticker", "Asset ticker"),
        Column("available", "Amount available for trading", ("available",)),
        # The API's "freeze"; renamed because FREEZE is a reserved word in DuckDB's SQL.
        Column("frozen", "Amount frozen in open orders (the API's 'freeze')", ("freeze",)),
    ),
    key=("ticker",),
    partition=SNAPSHOT,
    flows=(),
)

HEDGE: Final = History(
    name="hedge_mode",
    description="One row per snapshot: whether hedge mode is on for the collateral account",
    operation=HEDGE_MODE,
    columns=(Column("hedge_mode", "Hedge mode is on", ("hedgeMode",)),),
    key=(),
    partition=SNAPSHOT,
    flows=(),
)

LINKS: Final = History(
    name="watcher_links",
    description="One row per watcher link of each mining-pool account asked for",
    operation=WATCHER_LINKS,
    columns=(
        Column("mining_account", "Mining-pool account whose links were listed", OWNER),
        Column("link_id", "Watcher link identifier", ("id",)),
        Column("accounts", "Mining accounts the link covers", ("accounts",)),
        Column("name", "Link name", ("name",), allow_empty=True),
        Column("link", "Full URL of the link", ("link",)),
        Column("permissions", "Permissions the link grants", ("permissions",)),
        Column(
            "live_until",
            "When the link expires; null: never",
            ("liveUntil",),
            nullable=True,
            scheduled=True,
        ),
        Column("created_at", "When the link was created", ("createdAt",)),
    ),
    key=("mining_account", "link_id"),
    partition=SNAPSHOT,
    flows=(),
    paging=Fanout(param="account", setting="mining_accounts"),
)
