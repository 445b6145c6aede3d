"""The WhiteBIT REST API v4 client: signed, paced, retried, paged. No Dagster, Parquet or DuckDB.

`AsyncWhiteBIT` has one typed method per operation of `spec`, a walk of any history the spec
declares that fetches everything there is or says why it could not (`walk`: a `Walk`, newest
first, by offset window, or by time window), a snapshot's fetch (`snapshot`), and the exchange's
public prices (`markets`, `kline`, and a market's daily candles over any range, `candles`: a
`CandlesWalk`). Numbers with a fraction arrive as exact `Decimal`s; each walk's `WalkStats`
says when the exchange answered (``observed_at``) and where the exchange's six-month floor cut
its range (``cut_before``). Failures are the tree in `_errors`.
"""

from ._auth import Credentials
from ._candles import Candle, CandlesWalk
from ._client import RETRY_WAIT_FIELD, AsyncWhiteBIT, Together
from ._errors import (
    APIError,
    APIStatusError,
    AuthenticationError,
    ConnectionRefused,
    ContractError,
    HistoryOrderError,
    NonceRejectedError,
    NotFoundError,
    OffsetWindowExceeded,
    PayloadRejectedError,
    PermissionDeniedError,
    RateLimitError,
    RecordsLeftOut,
    ResponseFormatError,
    ServerError,
    TransportError,
    TransportTimeout,
    UnreadableResponseError,
    ValidationError,
    WalkError,
    WhiteBITError,
)
from ._pacing import Pacer
from ._params import checked_base_url
from ._retry import NO_RETRIES, RetryPolicy
from ._stats import WalkStats
from ._timewindows import TimeWindowsWalk
from ._types import (
    FixedPlan,
    FundingEntry,
    FundingPage,
    HedgeMode,
    Investment,
    InvestmentsPage,
    MainBalance,
    TradingBalance,
    WatcherLink,
)
from ._walks import NewestFirstWalk, Walk
from ._window import OffsetWindowWalk

__all__ = [
    "NO_RETRIES",
    "RETRY_WAIT_FIELD",
    "APIError",
    "APIStatusError",
    "AsyncWhiteBIT",
    "AuthenticationError",
    "Candle",
    "CandlesWalk",
    "ConnectionRefused",
    "ContractError",
    "Credentials",
    "FixedPlan",
    "FundingEntry",
    "FundingPage",
    "HedgeMode",
    "HistoryOrderError",
    "Investment",
    "InvestmentsPage",
    "MainBalance",
    "NewestFirstWalk",
    "NonceRejectedError",
    "NotFoundError",
    "OffsetWindowExceeded",
    "OffsetWindowWalk",
    "Pacer",
    "PayloadRejectedError",
    "PermissionDeniedError",
    "RateLimitError",
    "RecordsLeftOut",
    "ResponseFormatError",
    "RetryPolicy",
    "ServerError",
    "TimeWindowsWalk",
    "Together",
    "TradingBalance",
    "TransportError",
    "TransportTimeout",
    "UnreadableResponseError",
    "ValidationError",
    "Walk",
    "WalkError",
    "WalkStats",
    "WatcherLink",
    "WhiteBITError",
    "checked_base_url",
]
