"""The WhiteBIT REST API v4 operations this product uses: the one table of them.

Written from the contract in `docs/api.md` (sections 4, 7 and 8), filled in where it is silent
by that document's section on how the real service behaves. The client and the simulator both
read this package, and nothing else of each other: they agree because both follow this table.

Each `Operation` says how it is called (method, path, public or private), which rate budget it
draws from, which body parameters it takes with their bounds, how a validation failure is
answered, and the shape of a successful answer (`Field` tables).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from ._account_operations import ACCOUNT_OPERATIONS
from ._contract import (
    UUID_PATTERN,
    Empty,
    Field,
    FieldType,
    Keyed,
    Listed,
    Operation,
    Page,
    Param,
    Pong,
    RateBudget,
    Single,
    ValidationAnswer,
)
from ._public_operations import PUBLIC_OPERATIONS
from ._trade_operations import TRADE_OPERATIONS

#: Base addresses of the real service (docs/api.md, "Base addresses").
GLOBAL_BASE_URL: Final = "https://whitebit.com"
EU_BASE_URL: Final = "https://whitebit.eu"

#: A nonce sent with ``nonceWindow: true`` must be a millisecond time this close to the server's.
NONCE_WINDOW_MS: Final = 5_000

#: A perpetual market name, ``<BASE>_PERP``.
PERP_MARKET_PATTERN: Final = re.compile(r"^[A-Z0-9]{1,20}_PERP$")


# --- Response shapes (spec section 2) --------------------------------------------------------

FIXED_PLAN_FIELDS: Final = (
    Field("id", FieldType.STRING, meaning="Invest plan identifier"),
    Field("ticker", FieldType.STRING, meaning="Source currency ticker"),
    Field("status", FieldType.INTEGER, meaning="1 active, 2 no coins left, 3 inactive, 4 pause"),
    Field("percent", FieldType.DECIMAL, meaning="Interest percent"),
    Field("duration", FieldType.INTEGER, meaning="Investment duration in minutes"),
    Field("interestTicker", FieldType.STRING, meaning="Target currency ticker"),
    Field("interestRatio", FieldType.DECIMAL, meaning="Ratio of target to source currency"),
    Field("minInvestment", FieldType.DECIMAL, meaning="Minimum investment amount"),
    Field("maxInvestment", FieldType.DECIMAL, meaning="Maximum investment amount"),
    Field(
        "maxPossibleInvestment",
        FieldType.DECIMAL,
        meaning="Maximum investment amount under the plan's current state",
    ),
)

INVESTMENT_FIELDS: Final = (
    Field("id", FieldType.STRING, meaning="Investment identifier"),
    Field("plan", FieldType.OBJECT, meaning="The plan it belongs to", fields=FIXED_PLAN_FIELDS),
    Field("status", FieldType.INTEGER, meaning="1 active, 2 closed"),
    Field("created", FieldType.TIMESTAMP, meaning="Creation time"),
    Field("updated", FieldType.TIMESTAMP, meaning="Last update time"),
    Field("paymentTime", FieldType.TIMESTAMP, meaning="Payment time"),
    Field("amount", FieldType.DECIMAL, meaning="Investment amount"),
    Field("interestPaid", FieldType.DECIMAL, meaning="Interest paid so far"),
)

FUNDING_ENTRY_FIELDS: Final = (
    Field("market", FieldType.STRING, meaning="Perpetual market, <BASE>_PERP"),
    Field("fundingTime", FieldType.TIMESTAMP_STRING, meaning="Funding time"),
    Field("fundingRate", FieldType.DECIMAL, meaning="Funding rate"),
    Field("fundingAmount", FieldType.DECIMAL, meaning="Funding amount; may be negative"),
    Field("positionAmount", FieldType.DECIMAL, meaning="Position size; negative when short"),
    Field("settlementPrice", FieldType.DECIMAL, meaning="Settlement price"),
    Field("rateCalculatedTime", FieldType.TIMESTAMP_STRING, meaning="When the rate was computed"),
)

MAIN_BALANCE_FIELDS: Final = (Field("main_balance", FieldType.DECIMAL, meaning="Main balance"),)

TRADING_BALANCE_FIELDS: Final = (
    Field("available", FieldType.DECIMAL, meaning="Available amount"),
    Field("freeze", FieldType.DECIMAL, meaning="Amount frozen in orders"),
)

WATCHER_LINK_FIELDS: Final = (
    Field("id", FieldType.STRING, meaning="Link identifier"),
    Field("accounts", FieldType.STRING_LIST, meaning="Mining accounts the link covers"),
    Field("name", FieldType.STRING, meaning="Link name"),
    Field("link", FieldType.STRING, meaning="Full URL of the link"),
    Field("permissions", FieldType.STRING_LIST, meaning="Permissions granted by the link"),
    Field("liveUntil", FieldType.TIMESTAMP, nullable=True, meaning="Expiry time; null: none"),
    Field("createdAt", FieldType.TIMESTAMP, meaning="Creation time"),
)

HEDGE_MODE_FIELDS: Final = (Field("hedgeMode", FieldType.BOOLEAN, meaning="Hedge mode is on"),)

#: Statuses and their labels (spec section 3).
INVESTMENT_STATUSES: Final = {1: "active", 2: "closed"}
PLAN_STATUSES: Final = {1: "active", 2: "no coins left", 3: "inactive", 4: "pause"}


# --- The operations (docs/api.md section 4, budgets from section 8 and "Rate limits") ------

_LIMIT_100 = Param("limit", int, default=100, minimum=1, maximum=100)

PING: Final = Operation(
    name="ping",
    method="GET",
    path="/api/v4/public/ping",
    private=False,
    budget=RateBudget("public", 2000),
    answer=Pong(),
    summary='Server status; answers ["pong"]',
)

INVESTMENTS_HISTORY: Final = Operation(
    name="investments_history",
    method="POST",
    path="/api/v4/main-account/smart/investments",
    private=True,
    # main-account/* share one budget of 1000 per 10 s (docs/api.md, "Rate limits").
    budget=RateBudget("main-account", 1000),
    answer=Page(INVESTMENT_FIELDS),
    params=(
        Param("id", str, must_exist=True),
        Param("ticker", str, must_exist=True),
        Param("status", int, choices=tuple(INVESTMENT_STATUSES)),
        _LIMIT_100,
        Param("offset", int, default=0, minimum=0, maximum=10_000),
    ),
    summary="Fixed-term investments, B2B partners only; offset at most 10,000",
)

HEDGE_MODE: Final = Operation(
    name="hedge_mode",
    method="POST",
    path="/api/v4/collateral-account/hedge-mode",
    private=True,
    budget=RateBudget("hedge-mode", 12_000),
    answer=Single(HEDGE_MODE_FIELDS),
    summary="Whether hedge mode is on for the collateral account",
)

RESET_SUBACCOUNT_KEY: Final = Operation(
    name="reset_subaccount_key",
    method="POST",
    path="/api/v4/sub-account/api-key/reset",
    private=True,
    budget=RateBudget("sub-account-key-reset", 1000),
    answer=Empty(),
    writes=True,
    params=(Param("apiKeyId", str, required=True, pattern=UUID_PATTERN, must_exist=True),),
    summary="Regenerate a sub-account API key's secret; answers {}",
)

FUNDING_HISTORY: Final = Operation(
    name="funding_history",
    method="POST",
    path="/api/v4/collateral-account/funding-history",
    private=True,
    # Not published; "everything else 10000 by default" (docs/api.md, "Rate limits").
    budget=RateBudget("funding-history", 10_000),
    answer=Page(FUNDING_ENTRY_FIELDS),
    params=(
        Param("market", str, pattern=PERP_MARKET_PATTERN, must_exist=True),
        _LIMIT_100,
        Param("offset", int, default=0, minimum=0),
    ),
    validation=ValidationAnswer(422, 30),
    unknown_value=ValidationAnswer(422, 31),
    summary="Funding payments of the collateral account, newest first",
)

MAIN_BALANCE: Final = Operation(
    name="main_balance",
    method="POST",
    path="/api/v4/main-account/balance",
    private=True,
    budget=RateBudget("main-account", 1000),
    answer=Keyed(MAIN_BALANCE_FIELDS),
    # An unknown ticker answers a zero balance, not an error (docs/api.md, section 10).
    params=(Param("ticker", str),),
    summary="Main-account balance per ticker",
)

TRADING_BALANCE: Final = Operation(
    name="trading_balance",
    method="POST",
    path="/api/v4/trade-account/balance",
    private=True,
    budget=RateBudget("trade-account", 12_000),
    answer=Keyed(TRADING_BALANCE_FIELDS),
    params=(Param("ticker", str),),
    summary="Trading-account balance per ticker; zero balances omitted without a ticker",
)

WATCHER_LINKS: Final = Operation(
    name="watcher_links",
    method="POST",
    path="/api/v4/mining/watcher-links/list",
    private=True,
    budget=RateBudget("mining", 10_000),
    answer=Listed("data", WATCHER_LINK_FIELDS),
    params=(Param("account", str, required=True, max_length=255, must_exist=True),),
    summary="Watcher links of a mining-pool account",
)

OPERATIONS: Final = (
    PING,
    INVESTMENTS_HISTORY,
    HEDGE_MODE,
    RESET_SUBACCOUNT_KEY,
    FUNDING_HISTORY,
    MAIN_BALANCE,
    TRADING_BALANCE,
    WATCHER_LINKS,
    *TRADE_OPERATIONS,
    *ACCOUNT_OPERATIONS,
    *PUBLIC_OPERATIONS,
)
BY_PATH: Final[Mapping[str, Operation]] = {op.path: op for op in OPERATIONS}
BY_NAME: Final[Mapping[str, Operation]] = {op.name: op for op in OPERATIONS}
