"""When a failed call is tried again, and after how long.

Retried: the gateway's 429, a rejected nonce, 5xx, a dropped or refused connection, a timeout,
and an answer cut short (JSON that breaks off, or nothing), each a bounded number of times with a
backoff, and each re-signed with a fresh nonce. An answer that is JSON but breaks the contract,
a success that is not JSON at all (an HTML page), or a whole answer the JSON parser refuses
(invalid UTF-8, nesting too deep, a wrong character before the end) is a `ContractError`: tried
once more, at once, since no network fault makes it, the same answer twice is the exchange's,
and waiting would only delay the error.
Everything else raises at once.

An operation that changes state (the sub-account key reset) is retried only on the two answers that
prove it never ran: the gateway's 429 (refused before the exchange saw it) and a rejected nonce
(refused before the action). A 5xx, a timeout or a dropped connection may come after the reset was
done, so it is raised, never repeated.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Final

from pipeline import spec

from ._config import (
    CONTRACT_RETRIES,
    DEFAULT_MAX_RETRIES,
    INITIAL_RETRY_DELAY_S,
    MAX_RETRY_AFTER_S,
    MAX_RETRY_DELAY_S,
)
from ._errors import (
    APIError,
    APIStatusError,
    ContractError,
    NonceRejectedError,
    RateLimitError,
)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How many times to retry, and the capped exponential backoff between tries."""

    max_retries: int = DEFAULT_MAX_RETRIES
    initial_delay_s: float = INITIAL_RETRY_DELAY_S
    max_delay_s: float = MAX_RETRY_DELAY_S

    def __post_init__(self) -> None:
        if self.max_retries < 0 or self.initial_delay_s < 0 or self.max_delay_s < 0:
            raise ValueError("retry counts and delays cannot be negative")

    def should_retry(self, operation: spec.Operation, error: BaseException, attempts: int) -> bool:
        """Whether to try ``operation`` again after ``attempts`` attempts, the last of which
        raised ``error``. The one place that tells which failures are retried, and how often."""
        if not isinstance(error, APIError):
            return False
        if operation.writes and not isinstance(error, RateLimitError | NonceRejectedError):
            return False
        if isinstance(error, ContractError):
            return attempts <= min(CONTRACT_RETRIES, self.max_retries)
        return error.retryable and attempts <= self.max_retries

    def delay(self, retry: int, error: BaseException | None) -> float:
        """Seconds before retry number ``retry`` (1 for the first), after ``error``:
        ``Retry-After`` when the answer gave a sane one, else the capped backoff, less up to a
        quarter of jitter; none after a `ContractError`, whose one retry is for a hiccup."""
        if isinstance(error, ContractError):
            return 0.0
        retry_after = error.retry_after if isinstance(error, APIStatusError) else None
        if retry_after is not None and 0 <= retry_after <= MAX_RETRY_AFTER_S:
            return retry_after
        backoff = min(self.initial_delay_s * 2.0 ** (retry - 1), self.max_delay_s)
        # Jitter spreads concurrent retries apart; it is not cryptography.
        return backoff * (1 - 0.25 * random.random())  # noqa: S311


#: Retrying never: for callers that want every failure at once.
NO_RETRIES: Final = RetryPolicy(max_retries=0)
