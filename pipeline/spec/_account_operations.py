"""The rest of the account: its deposits and withdrawals, its sub-accounts and their transfers,
and its collateral positions and balances (docs/api.md, sections 4.13 to 4.20).

Where the official docs contradict themselves, each choice is the one the real service most
likely makes, from what widely used clients send and read; docs/api.md, section 10.8, gives the
choice and its evidence (``uniqueId`` rather than ``unique_id`` as the filter, a 200 rather than
the declared 201, the stricter of two published budgets). A record's field the docs name two ways
is read under either (`Field.alias`).
"""

from __future__ import annotations

from typing import Final

from ._contract import (
    UUID_PATTERN,
    Array,
    Field,
    FieldType,
    KeyedNumbers,
    Operation,
    PageEnvelope,
    Param,
    RateBudget,
    TimeWindow,
    ValidationAnswer,
    digits_param,
)
from ._trade_operations import MARKET_PATTERN

#: ``transactionMethod`` of a deposit or a withdrawal.
TRANSACTION_METHODS: Final = {1: "deposit", 2: "withdrawal"}
#: Deposit statuses and their labels (docs/api.md, section 3); codes are read per method.
DEPOSIT_STATUSES: Final = {
    3: "successful",
    7: "successful",
    4: "canceled",
    9: "canceled",
    5: "unconfirmed by user",
    15: "pending",
    21: "AML frozen",
    22: "uncredited",
    27: "travel rule: awaiting verification",
    28: "travel rule: confirmation in progress",
}
#: Withdrawal statuses and their labels.
WITHDRAWAL_STATUSES: Final = {
    **dict.fromkeys((1, 2, 6, 10, 11, 12, 13, 14, 15, 16, 17), "pending"),
    3: "successful",
    7: "successful",
    4: "canceled",
    5: "unconfirmed by user",
    18: "partially successful",
    21: "AML frozen",
}
#: Final statuses: a record in any other one may still change.
DEPOSIT_FINAL: Final = frozenset({3, 7, 4, 9})
WITHDRAWAL_FINAL: Final = frozenset({3, 7, 4})
#: Statuses in which a deposit has been credited, or a withdrawal has left for good.
SUCCESSFUL: Final = frozenset({3, 7})

#: A sub-account transfer's ``direction``.
TRANSFER_DIRECTIONS: Final = ("main_to_sub", "sub_to_main")
#: A collateral position's ``side``: ``BOTH`` in one-way mode, ``LONG``/``SHORT`` in hedge mode.
POSITION_SIDES: Final = ("LONG", "SHORT", "BOTH")
LIQUIDATION_STATES: Final = ("margin_call", "liquidation")

_LARAVEL: Final = ValidationAnswer(400, 0)
_ENGINE: Final = ValidationAnswer(422, 30, wording="engine")
_KEYS: Final = ValidationAnswer(422, 30, wording="keys")
_EVERY_STATUS: Final = tuple(sorted({*DEPOSIT_STATUSES, *WITHDRAWAL_STATUSES}))
_TICKER: Final = Param("ticker", str, must_exist=True, exists_in="currencies")

# --- Records (docs/api.md, sections 2.13 to 2.19) ----------------------------------------------

TRANSACTION_FIELDS: Final = (
    Field("address", FieldType.STRING, meaning="Address the funds came from or went to"),
    Field(
        "uniqueId",
        FieldType.STRING,
        nullable=True,
        meaning="Unique per user; null: none",
        alias="unique_id",
    ),
    Field("createdAt", FieldType.TIMESTAMP, meaning="When it was created"),
    Field("currency", FieldType.STRING, meaning="Currency's full name"),
    Field("ticker", FieldType.STRING, meaning="Currency's ticker"),
    Field("method", FieldType.INTEGER, meaning="1 deposit, 2 withdrawal"),
    Field("amount", FieldType.DECIMAL, meaning="Amount"),
    Field("description", FieldType.STRING, meaning="Description; may be ''"),
    Field("memo", FieldType.STRING, meaning="Memo; may be ''"),
    Field("fee", FieldType.DECIMAL, meaning="Fee, in the same currency"),
    Field("status", FieldType.INTEGER, meaning="Status code, read per method"),
    Field("network", FieldType.STRING, nullable=True, meaning="Network of a multi-network coin"),
    Field("transactionHash", FieldType.STRING, meaning="On-chain hash; '' before it is sent"),
    Field(
        "transactionId",
        FieldType.STRING,
        meaning="Transaction UUID, never reused",
        alias="transaction_id",
    ),
    Field(
        "details",
        FieldType.OBJECT,
        nullable=True,
        meaning="A partial withdrawal's progress; null otherwise",
        fields=(
            Field(
                "partial",
                FieldType.OBJECT,
                meaning="What of the request was processed",
                fields=(
                    Field("requestAmount", FieldType.DECIMAL, meaning="Amount requested"),
                    Field("processedAmount", FieldType.DECIMAL, meaning="Amount sent so far"),
                    Field("processedFee", FieldType.DECIMAL, meaning="Fee charged so far"),
                    Field("normalizeTransaction", FieldType.STRING, meaning="'' or a reference"),
                ),
            ),
        ),
    ),
    Field(
        "confirmations",
        FieldType.OBJECT,
        nullable=True,
        meaning="A deposit's network confirmations; null for withdrawals",
        fields=(
            Field("actual", FieldType.INTEGER, meaning="Confirmations so far"),
            Field("required", FieldType.INTEGER, meaning="Confirmations it needs"),
        ),
    ),
)

SUBACCOUNT_FIELDS: Final = (
    Field("id", FieldType.STRING, meaning="Sub-account identifier (UUID)"),
    Field("alias", FieldType.STRING, meaning="Its name"),
    Field("userId", FieldType.STRING, meaning="User of the sub-account (UUID)"),
    Field("email", FieldType.STRING, meaning="Its e-mail address, masked"),
    Field("status", FieldType.STRING, meaning="active, or another state"),
    Field("color", FieldType.STRING, meaning="Colour in the web interface, #RRGGBB"),
    Field(
        "kyc",
        FieldType.OBJECT,
        meaning="Whether it shares the main account's KYC",
        fields=(
            Field("shareKyc", FieldType.BOOLEAN, meaning="KYC shared with the main account"),
            Field("kycStatus", FieldType.STRING, meaning="verified, shared, ..."),
        ),
    ),
    Field(
        "permissions",
        FieldType.OBJECT,
        meaning="What it may trade",
        fields=(
            Field("spotEnabled", FieldType.BOOLEAN, meaning="Spot trading allowed"),
            Field("collateralEnabled", FieldType.BOOLEAN, meaning="Collateral trading allowed"),
        ),
    ),
)

TRANSFER_FIELDS: Final = (
    Field(
        "transactionId",
        FieldType.STRING,
        meaning="Transfer identifier (UUID, time-ordered)",
        alias="transaction_id",
    ),
    Field("id", FieldType.STRING, meaning="Deprecated: the same value as transactionId"),
    Field("direction", FieldType.STRING, meaning="main_to_sub or sub_to_main"),
    Field("currency", FieldType.STRING, meaning="Ticker transferred"),
    Field("amount", FieldType.DECIMAL, meaning="Amount transferred"),
    Field("createdAt", FieldType.TIMESTAMP, meaning="When it was made"),
)

POSITION_EVENT_FIELDS: Final = (
    Field("positionId", FieldType.INTEGER, meaning="Position identifier"),
    Field("market", FieldType.STRING, meaning="Collateral market, <BASE>_PERP"),
    Field("openDate", FieldType.TIMESTAMP_FRACTIONAL, meaning="When the position opened"),
    Field("modifyDate", FieldType.TIMESTAMP_FRACTIONAL, meaning="When this event happened"),
    Field("amount", FieldType.DECIMAL, meaning="Position size after it; negative when short"),
    Field("basePrice", FieldType.DECIMAL, meaning="Average entry price after it"),
    Field(
        "realizedFunding",
        FieldType.DECIMAL,
        meaning="Sum of the position's funding entries' fundingAmount so far",
    ),
    Field("liquidationPrice", FieldType.DECIMAL, nullable=True, meaning="null once closed"),
    Field("liquidationState", FieldType.STRING, nullable=True, meaning="margin_call, liquidation"),
    Field(
        "orderDetail",
        FieldType.OBJECT,
        meaning="The order (one fill) that made this change",
        fields=(
            Field("id", FieldType.INTEGER, meaning="Order identifier"),
            Field("tradeAmount", FieldType.DECIMAL, meaning="Amount traded (positive)"),
            Field("price", FieldType.DECIMAL, meaning="Price traded at"),
            Field("tradeFee", FieldType.DECIMAL, meaning="Fee paid, in the settlement ticker"),
            Field(
                "fundingFee",
                FieldType.DECIMAL,
                nullable=True,
                meaning="fundingAmount summed since the position's previous event; null: none",
            ),
            Field(
                "realizedPnl",
                FieldType.DECIMAL,
                nullable=True,
                meaning="Price P&L of the part closed, before fees; null when nothing closed",
            ),
        ),
    ),
    Field("side", FieldType.STRING, meaning="LONG, SHORT (hedge mode) or BOTH (one-way)"),
    Field("isHedge", FieldType.BOOLEAN, meaning="Opened in hedge mode"),
)

CLOSED_POSITION_FIELDS: Final = (
    Field("positionId", FieldType.INTEGER, meaning="Position identifier"),
    Field("market", FieldType.STRING, meaning="Collateral market"),
    Field("grossPnl", FieldType.DECIMAL, meaning="Sum of realizedPnl minus totalTradeFee"),
    Field("netPnl", FieldType.DECIMAL, meaning="grossPnl minus totalFunding"),
    Field("totalTradeFee", FieldType.DECIMAL, meaning="Sum of its events' tradeFee"),
    Field("totalFunding", FieldType.DECIMAL, meaning="Funding paid: minus its fundingAmounts' sum"),
    Field("avgEntryPrice", FieldType.DECIMAL, meaning="Average price of its increases"),
    Field("avgExitPrice", FieldType.DECIMAL, meaning="Average price of its reductions"),
    Field("closedSize", FieldType.DECIMAL, meaning="Sum of the amounts its reductions closed"),
    Field("amount", FieldType.DECIMAL, meaning="Always '0'"),
    Field("side", FieldType.STRING, meaning="LONG, SHORT or BOTH"),
    Field("isHedge", FieldType.BOOLEAN, meaning="Opened in hedge mode"),
    Field("openDate", FieldType.TIMESTAMP, meaning="When it opened"),
    Field("closeDate", FieldType.TIMESTAMP, meaning="When it closed"),
)

OPEN_POSITION_FIELDS: Final = (
    Field("positionId", FieldType.INTEGER, meaning="Position identifier"),
    Field("market", FieldType.STRING, meaning="Collateral market"),
    Field("openDate", FieldType.TIMESTAMP_FRACTIONAL, meaning="When it opened"),
    Field("modifyDate", FieldType.TIMESTAMP_FRACTIONAL, meaning="Its last event"),
    Field("amount", FieldType.DECIMAL, meaning="Size; negative when short"),
    Field("basePrice", FieldType.DECIMAL, meaning="Average entry price"),
    Field("liquidationPrice", FieldType.DECIMAL, nullable=True, meaning="Liquidation price"),
    Field("liquidationState", FieldType.STRING, nullable=True, meaning="margin_call, liquidation"),
    Field("pnl", FieldType.DECIMAL, meaning="P&L realized by its partial closes so far"),
    Field("pnlPercent", FieldType.DECIMAL, meaning="Unrealized P&L, percent of its margin"),
    Field("margin", FieldType.DECIMAL, meaning="Margin it holds"),
    Field("freeMargin", FieldType.DECIMAL, meaning="Collateral margin left free"),
    Field("funding", FieldType.DECIMAL, meaning="Lifetime funding; '0' on _PERP markets"),
    Field("unrealizedFunding", FieldType.DECIMAL, meaning="'0' on _PERP markets"),
    Field("unrealizedPnl", FieldType.DECIMAL, meaning="Mark-to-market P&L"),
    Field(
        "tpsl",
        FieldType.OBJECT,
        nullable=True,
        meaning="Take-profit and stop-loss orders; null: none",
        fields=(
            Field("takeProfitId", FieldType.INTEGER, meaning="Take-profit order"),
            Field("takeProfit", FieldType.DECIMAL, meaning="Take-profit price"),
            Field("stopLossId", FieldType.INTEGER, meaning="Stop-loss order"),
            Field("stopLoss", FieldType.DECIMAL, meaning="Stop-loss price"),
        ),
    ),
    Field("positionSide", FieldType.STRING, meaning="LONG, SHORT or BOTH"),
)

BALANCE_SUMMARY_FIELDS: Final = (
    Field("asset", FieldType.STRING, meaning="Ticker"),
    Field("balance", FieldType.DECIMAL, meaning="Collateral balance (the balance answer's number)"),
    Field("borrow", FieldType.DECIMAL, meaning="Borrowed"),
    Field("availableWithoutBorrow", FieldType.DECIMAL, meaning="Free to use without borrowing"),
    Field("availableWithBorrow", FieldType.DECIMAL, meaning="Free to use with leverage"),
)

# --- The operations (docs/api.md, sections 4.13 to 4.20) ----------------------------------------

MAIN_ACCOUNT_HISTORY: Final = Operation(
    name="main_account_history",
    method="POST",
    path="/api/v4/main-account/history",
    private=True,
    budget=RateBudget("main-account", 1000),
    endpoint_budget=RateBudget("main-account-history", 200),
    answer=PageEnvelope(TRANSACTION_FIELDS, total=True),
    params=(
        # ccxt, the Go SDK and the older docs send the method as "1" or "2".
        Param("transactionMethod", int, choices=tuple(TRANSACTION_METHODS), numeric_text=True),
        _TICKER,
        Param("address", str),
        Param("memo", str),
        Param("addresses", list, items=Param("addresses", str), max_items=20),
        Param("uniqueId", str),
        digits_param("limit", default=50, minimum=1, maximum=500),
        digits_param("offset", default=0, minimum=0, maximum=10_000),
        Param(
            "status",
            list,
            items=Param("status", int, choices=_EVERY_STATUS),
        ),
    ),
    validation=_LARAVEL,
    max_reach=10_000,
    summary="Deposits and withdrawals, newest first by createdAt; no date filter",
)

SUBACCOUNT_LIST: Final = Operation(
    name="subaccount_list",
    method="POST",
    path="/api/v4/sub-account/list",
    private=True,
    budget=RateBudget("sub-account-list", 1000),
    answer=PageEnvelope(SUBACCOUNT_FIELDS, under="data"),
    params=(
        Param("search", str, max_length=255),
        digits_param("limit", default=30, minimum=1, maximum=100),
        digits_param("offset", default=0, minimum=0, maximum=10_000),
    ),
    validation=_LARAVEL,
    summary="The main account's sub-accounts, in the order they were made",
)

SUBACCOUNT_TRANSFERS: Final = Operation(
    name="subaccount_transfers",
    method="POST",
    path="/api/v4/sub-account/transfer/history",
    private=True,
    budget=RateBudget("sub-account-transfer-history", 1000),
    answer=PageEnvelope(TRANSFER_FIELDS, under="data"),
    params=(
        Param(
            "id",
            str,
            required=True,
            pattern=UUID_PATTERN,
            must_exist=True,
            exists_in="subaccounts",
        ),
        Param("direction", str, text_choices=TRANSFER_DIRECTIONS),
        digits_param("limit", default=100, minimum=1, maximum=100),
        digits_param("offset", default=0, minimum=0, maximum=10_000),
    ),
    validation=_LARAVEL,
    max_reach=10_000,
    summary="Transfers between the main account and one sub-account, newest first",
)

POSITIONS_HISTORY: Final = Operation(
    name="positions_history",
    method="POST",
    path="/api/v4/collateral-account/positions/history",
    private=True,
    budget=RateBudget("collateral-positions-history", 12_000),
    answer=Array(POSITION_EVENT_FIELDS),
    params=(
        Param(
            "market",
            str,
            pattern=MARKET_PATTERN,
            must_exist=True,
            exists_in="collateral_markets",
        ),
        digits_param("positionId", minimum=1),
        digits_param("startDate", minimum=0),
        digits_param("endDate", minimum=0),
        digits_param("limit", default=50, minimum=1, maximum=100),
        digits_param("offset", default=0, minimum=0),
    ),
    validation=_ENGINE,
    window=TimeWindow("startDate", "endDate", future_end="reject", applies_to="modifyDate"),
    summary="Every event of the collateral positions, newest first; positionId over market",
)

CLOSED_PNL: Final = Operation(
    name="closed_pnl",
    method="POST",
    path="/api/v4/collateral-account/positions/closed-pnl",
    private=True,
    budget=RateBudget("collateral-closed-pnl", 12_000),
    answer=Array(CLOSED_POSITION_FIELDS),
    params=(
        digits_param("startDate", minimum=0),
        digits_param("endDate", minimum=0),
        digits_param("limit", default=50, minimum=1, maximum=100),
        digits_param("offset", default=0, minimum=0),
    ),
    validation=_ENGINE,
    max_reach=10_000,
    window=TimeWindow("startDate", "endDate", future_end="reject", applies_to="closeDate"),
    summary="One aggregate per closed position, newest first by closeDate then positionId",
)

OPEN_POSITIONS: Final = Operation(
    name="open_positions",
    method="POST",
    path="/api/v4/collateral-account/positions/open",
    private=True,
    # 12,000 in the endpoint's text, 100 on its page: the stricter (docs/api.md, 10.8).
    budget=RateBudget("collateral-positions-open", 100),
    answer=Array(OPEN_POSITION_FIELDS),
    params=(Param("market", str, pattern=MARKET_PATTERN),),
    validation=_ENGINE,
    summary="The collateral positions open now, by positionId",
)

COLLATERAL_BALANCE: Final = Operation(
    name="collateral_balance",
    method="POST",
    path="/api/v4/collateral-account/balance",
    private=True,
    # 12,000 in rate-limits.yaml and the endpoint's text, 100 on its page: the stricter.
    budget=RateBudget("collateral-balance", 100),
    answer=KeyedNumbers(),
    params=(_TICKER,),
    validation=_KEYS,
    summary="Collateral balance per ticker, as JSON numbers",
)

COLLATERAL_BALANCE_SUMMARY: Final = Operation(
    name="collateral_balance_summary",
    method="POST",
    path="/api/v4/collateral-account/balance-summary",
    private=True,
    budget=RateBudget("collateral-balance-summary", 12_000),
    answer=Array(BALANCE_SUMMARY_FIELDS),
    params=(_TICKER,),
    validation=_KEYS,
    summary="Collateral balance per ticker as exact decimal strings, with borrowing",
)

ACCOUNT_OPERATIONS: Final = (
    MAIN_ACCOUNT_HISTORY,
    SUBACCOUNT_LIST,
    SUBACCOUNT_TRANSFERS,
    POSITIONS_HISTORY,
    CLOSED_PNL,
    OPEN_POSITIONS,
    COLLATERAL_BALANCE,
    COLLATERAL_BALANCE_SUMMARY,
)
