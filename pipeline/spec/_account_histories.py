"""The rest of the account, each declared once: money in and out (deposits and withdrawals, and
those still pending when the balances were taken), sub-accounts and the transfers with them,
collateral positions (their events, their closed P&L, those open now) and the collateral balance.
"""

from __future__ import annotations

from typing import Final

from ._account_operations import (
    CLOSED_PNL,
    COLLATERAL_BALANCE_SUMMARY,
    DEPOSIT_FINAL,
    DEPOSIT_STATUSES,
    LIQUIDATION_STATES,
    MAIN_ACCOUNT_HISTORY,
    OPEN_POSITIONS,
    POSITION_SIDES,
    POSITIONS_HISTORY,
    SUBACCOUNT_LIST,
    SUBACCOUNT_TRANSFERS,
    SUCCESSFUL,
    TRANSACTION_METHODS,
    TRANSFER_DIRECTIONS,
    WITHDRAWAL_FINAL,
    WITHDRAWAL_STATUSES,
)
from ._histories import SETTLED_IN
from ._history import (
    OWNER,
    SNAPSHOT,
    Column,
    Flow,
    History,
    Monthly,
    OffsetWindow,
    Split,
    Subaccount,
    TimeWindows,
)
from ._operations import MAIN_BALANCE
from ._trade_histories import kept, market, ticker

#: A deposit's or a withdrawal's status labels, by its method.
STATUSES_BY_METHOD: Final = {1: DEPOSIT_STATUSES, 2: WITHDRAWAL_STATUSES}
#: Statuses that are final for neither method: a record in one may still change.
PENDING_STATUSES: Final = tuple(
    sorted({*DEPOSIT_STATUSES, *WITHDRAWAL_STATUSES} - DEPOSIT_FINAL - WITHDRAWAL_FINAL)
)


def _in(codes: frozenset[int]) -> str:
    return ", ".join(str(c) for c in sorted(codes))


def _code(labels: dict[int, str], label: str) -> int:
    (code,) = (code for code, named in labels.items() if named == label)
    return code


_DEPOSIT: Final = f"method = {_code(TRANSACTION_METHODS, 'deposit')}"
_WITHDRAWAL: Final = f"method = {_code(TRANSACTION_METHODS, 'withdrawal')}"
_SUCCESSFUL_DEPOSIT: Final = f"{_DEPOSIT} AND status IN ({_in(SUCCESSFUL)})"

#: A deposit or a withdrawal not in a final status (docs/api.md, section 10.9).
NOT_FINAL: Final = (
    f"({_DEPOSIT} AND status NOT IN ({_in(DEPOSIT_FINAL)})) "
    f"OR ({_WITHDRAWAL} AND status NOT IN ({_in(WITHDRAWAL_FINAL)}))"
)

#: What changes in a deposit or a withdrawal while it is on its way: its status, a deposit's
#: confirmations, a withdrawal's hash once sent, a partial withdrawal's progress.
_IN_FLIGHT: Final = ("status", "confirmations", "transactionHash", "details")

_MOVEMENT_COLUMNS: Final = (
    Column("transaction_id", "Transaction identifier (UUID, never reused)", ("transactionId",)),
    Column("created_at", "When it was created, to the second", ("createdAt",)),
    Column("method", "1 deposit, 2 withdrawal", ("method",), labels=TRANSACTION_METHODS),
    ticker("ticker", "Ticker deposited or withdrawn", "ticker"),
    Column("amount", "Amount", ("amount",)),
    Column("fee", "Fee, in the same ticker", ("fee",)),
    Column(
        "status",
        "Status code, read by method (pending, successful, canceled, ...)",
        ("status",),
        labels_by=("method", STATUSES_BY_METHOD),
        unlisted="keep",
    ),
)

DEPOSITS_WITHDRAWALS: Final = History(
    name="deposits_withdrawals",
    description="One row per deposit or withdrawal of the main account, as its status is now",
    operation=MAIN_ACCOUNT_HISTORY,
    columns=(
        *_MOVEMENT_COLUMNS,
        Column(
            "unique_id", "Unique id given by the user; null: none", ("uniqueId",), nullable=True
        ),
        Column("currency", "Currency's full name", ("currency",)),
        Column("network", "Network of a multi-network coin", ("network",), nullable=True),
        Column("address", "Address the funds came from or went to", ("address",), allow_empty=True),
        Column("memo", "Memo; may be ''", ("memo",), allow_empty=True),
        Column("description", "Description; may be ''", ("description",), allow_empty=True),
        Column(
            "transaction_hash",
            "On-chain hash; '' before it is sent",
            ("transactionHash",),
            allow_empty=True,
        ),
        Column(
            "request_amount",
            "A partial withdrawal: the amount requested",
            ("details", "partial", "requestAmount"),
            nullable=True,
        ),
        Column(
            "processed_amount",
            "A partial withdrawal: the amount sent so far",
            ("details", "partial", "processedAmount"),
            nullable=True,
        ),
        Column(
            "processed_fee",
            "A partial withdrawal: the fee charged so far",
            ("details", "partial", "processedFee"),
            nullable=True,
        ),
        Column(
            "confirmations",
            "A deposit's network confirmations so far",
            ("confirmations", "actual"),
            nullable=True,
        ),
        Column(
            "confirmations_required",
            "A deposit's network confirmations needed",
            ("confirmations", "required"),
            nullable=True,
        ),
        Column("created_date", "UTC day of created_at (a file holds a month)", day_of="created_at"),
    ),
    key=("transaction_id",),
    flows=(
        # Credited less its fee once successful.
        Flow("deposits", "ticker", "amount - fee", "settled", _SUCCESSFUL_DEPOSIT),
        # Taken when it is made; given back, fee and all, when it ends canceled.
        Flow("withdrawals", "ticker", "-(amount + fee)", "stamped", _WITHDRAWAL, fee="-fee"),
        Flow(
            "withdrawals_returned",
            "ticker",
            "amount + fee",
            "settled",
            f"{_WITHDRAWAL} AND status = {_code(WITHDRAWAL_STATUSES, 'canceled')}",
            fee="fee",
        ),
    ),
    partition=Monthly(time="created_at", day="created_date", month_path="created_month"),
    # No date filter, at most 10,000 records deep: split by method, then ticker, then status.
    paging=OffsetWindow(
        splits=(
            Split("transactionMethod"),
            Split("ticker", seen=("ticker",), listed_by=MAIN_BALANCE),
            Split("status"),
        ),
        identity="transactionId",
        time="createdAt",
        changing=_IN_FLIGHT,
    ),
    unsettled=NOT_FINAL,
)

PENDING_FLOWS: Final = History(
    name="pending_flows",
    description="One row per deposit or withdrawal not final when the snapshot was taken: "
    "money in flight, which the balances do not show yet (deposits) or still hold (withdrawals)",
    operation=MAIN_ACCOUNT_HISTORY,
    columns=_MOVEMENT_COLUMNS,
    key=("transaction_id",),
    partition=SNAPSHOT,
    # Records of deposits_withdrawals, which move the holdings.
    flows=(),
    paging=OffsetWindow(
        splits=(
            Split("transactionMethod"),
            Split("ticker", seen=("ticker",), listed_by=MAIN_BALANCE),
        ),
        identity="transactionId",
        changing=_IN_FLIGHT,
    ),
    params={"status": list(PENDING_STATUSES)},
)

SUBACCOUNTS: Final = History(
    name="subaccounts",
    description="One row per sub-account of the main account",
    operation=SUBACCOUNT_LIST,
    columns=(
        Column("subaccount_id", "Sub-account identifier (UUID)", ("id",)),
        Column("alias", "Its name: the warehouse's account of the same name is it", ("alias",)),
        Column("user_id", "User of the sub-account (UUID)", ("userId",)),
        Column("email", "Its e-mail address, masked", ("email",), allow_empty=True),
        Column("status", "active, or another state", ("status",)),
        Column("share_kyc", "KYC shared with the main account", ("kyc", "shareKyc")),
        Column("kyc_status", "verified, shared, ...", ("kyc", "kycStatus")),
        Column("spot_enabled", "Spot trading allowed", ("permissions", "spotEnabled")),
        Column(
            "collateral_enabled", "Collateral trading allowed", ("permissions", "collateralEnabled")
        ),
    ),
    key=("subaccount_id",),
    partition=SNAPSHOT,
    flows=(),
    paging=OffsetWindow(splits=(), identity="id"),
    access="subaccounts",
)

_TO_SUB: Final = "direction = 'main_to_sub'"
_TO_MAIN: Final = "direction = 'sub_to_main'"
_SUBACCOUNT: Final = Subaccount("subaccount_id")

SUBACCOUNT_TRANSFERS_HISTORY: Final = History(
    name="subaccount_transfers",
    description="One row per transfer between the main account and one of its sub-accounts",
    operation=SUBACCOUNT_TRANSFERS,
    columns=(
        Column("subaccount_id", "The sub-account (subaccounts.subaccount_id)", OWNER),
        Column("transfer_id", "Transfer identifier (UUID)", ("transactionId",)),
        kept("direction", "main_to_sub or sub_to_main", "direction", TRANSFER_DIRECTIONS),
        ticker("ticker", "Ticker transferred", "currency"),
        Column("amount", "Amount transferred", ("amount",)),
        Column("created_at", "When it was made, to the second", ("createdAt",)),
        Column("created_date", "UTC day of created_at (a file holds a month)", day_of="created_at"),
    ),
    key=("transfer_id",),
    # The main account's records, and as many flows the other way for the sub-account.
    flows=(
        Flow("transfers_out", "ticker", "-amount", "stamped", _TO_SUB),
        Flow("transfers_in", "ticker", "amount", "stamped", _TO_MAIN),
        Flow("transfers_in", "ticker", "amount", "stamped", _TO_SUB, _SUBACCOUNT),
        Flow("transfers_out", "ticker", "-amount", "stamped", _TO_MAIN, _SUBACCOUNT),
    ),
    partition=Monthly(time="created_at", day="created_date", month_path="created_month"),
    paging=OffsetWindow(
        splits=(
            Split("id", listed_by=SUBACCOUNT_LIST, listed_at="id", owner=True),
            Split("direction"),
        ),
        identity="transactionId",
        time="createdAt",
    ),
    access="subaccounts",
)

_POSITION_SIDE: Final = kept(
    "side", "LONG, SHORT (hedge mode) or BOTH (one-way)", "side", POSITION_SIDES
)

POSITION_EVENTS: Final = History(
    name="position_events",
    description="One row per change of a collateral position (a fill of its market)",
    operation=POSITIONS_HISTORY,
    columns=(
        Column("position_id", "Position identifier", ("positionId",)),
        market(("market",)),
        Column("event_time", "When this change happened, to the microsecond", ("modifyDate",)),
        Column("opened_at", "When the position opened", ("openDate",)),
        Column("amount", "Position size after it; negative when short", ("amount",)),
        Column("base_price", "Average entry price after it", ("basePrice",)),
        Column("realized_funding", "Funding of the position so far", ("realizedFunding",)),
        Column(
            "liquidation_price",
            "Liquidation price; null once closed",
            ("liquidationPrice",),
            nullable=True,
        ),
        Column(
            "liquidation_state",
            "margin_call, liquidation; null: neither",
            ("liquidationState",),
            nullable=True,
            choices=LIQUIDATION_STATES,
            unlisted="keep",
        ),
        Column("order_id", "The order that made the change", ("orderDetail", "id")),
        Column("trade_amount", "Amount traded", ("orderDetail", "tradeAmount")),
        Column("trade_price", "Price traded at", ("orderDetail", "price")),
        Column("trade_fee", "Fee paid, in the settlement ticker", ("orderDetail", "tradeFee")),
        Column(
            "funding_fee",
            "Funding since the position's previous change; null: none",
            ("orderDetail", "fundingFee"),
            nullable=True,
        ),
        Column(
            "realized_pnl",
            "Price P&L of the part closed, before fees; null: none closed",
            ("orderDetail", "realizedPnl"),
            nullable=True,
        ),
        _POSITION_SIDE,
        Column("is_hedge", "Opened in hedge mode", ("isHedge",)),
        Column("event_date", "UTC day of event_time (a file holds a month)", day_of="event_time"),
    ),
    key=("position_id", "event_time"),
    # A collateral fill's change of the settlement ticker: its P&L (of a part closed) and fee.
    flows=(
        Flow("realized_pnl", SETTLED_IN, "realized_pnl", "exact", "realized_pnl IS NOT NULL"),
        Flow("position_fees", SETTLED_IN, "-trade_fee", "exact", fee="-trade_fee"),
    ),
    partition=Monthly(time="event_time", day="event_date", month_path="event_month"),
    paging=TimeWindows(identity=("positionId", "modifyDate")),
)

CLOSED_POSITIONS: Final = History(
    name="closed_positions",
    description="One row per closed collateral position: its P&L, fees and funding",
    operation=CLOSED_PNL,
    columns=(
        Column("position_id", "Position identifier", ("positionId",)),
        market(("market",)),
        Column("gross_pnl", "Realized P&L minus trade fees", ("grossPnl",)),
        Column("net_pnl", "gross_pnl minus funding paid", ("netPnl",)),
        Column("total_trade_fee", "Trade fees of its changes", ("totalTradeFee",)),
        Column("total_funding", "Funding paid (minus the funding amounts' sum)", ("totalFunding",)),
        Column("avg_entry_price", "Average price of its increases", ("avgEntryPrice",)),
        Column("avg_exit_price", "Average price of its reductions", ("avgExitPrice",)),
        Column("closed_size", "Amount its reductions closed", ("closedSize",)),
        _POSITION_SIDE,
        Column("is_hedge", "Opened in hedge mode", ("isHedge",)),
        Column("opened_at", "When it opened", ("openDate",)),
        Column("closed_at", "When it closed", ("closeDate",)),
        Column("closed_date", "UTC day of closed_at (a file holds a month)", day_of="closed_at"),
    ),
    key=("position_id",),
    # The sums of its position events and funding payments.
    flows=(),
    partition=Monthly(time="closed_at", day="closed_date", month_path="closed_month"),
    paging=TimeWindows(identity=("positionId",)),
)

OPEN_POSITIONS_NOW: Final = History(
    name="open_positions",
    description="One row per collateral position open when the snapshot was taken",
    operation=OPEN_POSITIONS,
    columns=(
        Column("position_id", "Position identifier", ("positionId",)),
        market(("market",)),
        Column("opened_at", "When it opened", ("openDate",)),
        Column("modified_at", "Its last change", ("modifyDate",)),
        Column("amount", "Size; negative when short", ("amount",)),
        Column("base_price", "Average entry price", ("basePrice",)),
        Column("liquidation_price", "Liquidation price", ("liquidationPrice",), nullable=True),
        Column(
            "liquidation_state",
            "margin_call, liquidation; null: neither",
            ("liquidationState",),
            nullable=True,
            choices=LIQUIDATION_STATES,
            unlisted="keep",
        ),
        Column("pnl", "P&L realized by its partial closes so far", ("pnl",)),
        Column("pnl_percent", "Unrealized P&L, percent of its margin", ("pnlPercent",)),
        Column("margin", "Margin it holds", ("margin",)),
        Column("free_margin", "Collateral margin left free", ("freeMargin",)),
        Column("funding", "Lifetime funding", ("funding",)),
        Column("unrealized_funding", "Funding not yet realized", ("unrealizedFunding",)),
        Column("unrealized_pnl", "Mark-to-market P&L", ("unrealizedPnl",)),
        Column(
            "take_profit_id",
            "Take-profit order; null: none",
            ("tpsl", "takeProfitId"),
            nullable=True,
        ),
        Column("take_profit", "Take-profit price", ("tpsl", "takeProfit"), nullable=True),
        Column(
            "stop_loss_id", "Stop-loss order; null: none", ("tpsl", "stopLossId"), nullable=True
        ),
        Column("stop_loss", "Stop-loss price", ("tpsl", "stopLoss"), nullable=True),
        kept("position_side", "LONG, SHORT or BOTH", "positionSide", POSITION_SIDES),
    ),
    key=("position_id",),
    partition=SNAPSHOT,
    flows=(),
)

COLLATERAL_BALANCES: Final = History(
    name="collateral_balances",
    description="One row per asset of the collateral account, exact (the balance summary)",
    operation=COLLATERAL_BALANCE_SUMMARY,
    columns=(
        ticker("ticker", "Asset ticker", "asset"),
        Column("balance", "Collateral balance", ("balance",)),
        Column("borrow", "Borrowed", ("borrow",)),
        Column(
            "available_without_borrow", "Free to use without borrowing", ("availableWithoutBorrow",)
        ),
        Column("available_with_borrow", "Free to use with leverage", ("availableWithBorrow",)),
    ),
    key=("ticker",),
    partition=SNAPSHOT,
    flows=(),
)
