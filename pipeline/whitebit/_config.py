"""Every default of the client, named once: timeouts, retries, pacing, concurrency, nonces.

What the exchange itself dictates (paths, budgets, bounds, nonce window) lives in `spec`; these are
the client's own choices, and each one says why it has the value it has.
"""

from __future__ import annotations

from typing import Final

from pipeline import spec

DEFAULT_BASE_URL: Final = spec.GLOBAL_BASE_URL

#: Seconds to wait for a connection, a read or a pool slot; a page answers in milliseconds.
DEFAULT_TIMEOUT_S: Final = 30.0

#: Retries after the first attempt: enough that a run of failures outlasting them stays rare
#: even at a high fault rate.
DEFAULT_MAX_RETRIES: Final = 8
#: Retries, without a wait, of an answer that breaks the contract: a second look tells a hiccup
#: (a proxy's, a deploy's) from the exchange's answer; more would only delay the error.
CONTRACT_RETRIES: Final = 1
#: First backoff; doubled per retry up to the maximum, then jittered down by at most a quarter.
INITIAL_RETRY_DELAY_S: Final = 0.25
MAX_RETRY_DELAY_S: Final = 8.0
#: A ``Retry-After`` longer than this is not believed; the capped backoff is used instead.
MAX_RETRY_AFTER_S: Final = 60.0

#: Requests in flight at once: at the exchange's distance (some 100 ms a round trip) a page read
#: costs a round trip, and what one core reads (300 to 600 pages a second) needs 30 to 60 in
#: flight. The pacer, not this, keeps them within the budgets; a time-windows walk asks only as
#: many as its reading needs (`_timewindows._Flow`).
DEFAULT_MAX_CONCURRENCY: Final = 64
#: Pages one stream of pages (a slice, a window) asks ahead of the one it reads, at most: each
#: may be past its end, and then is a request wasted; more in flight come from more streams.
MAX_PAGES_AHEAD: Final = 8
#: Windows of a time-windows walk read at once (the one being yielded and those after it): the
#: next ones hold their first pages by the yielded one's end, so that the walk's pages neither
#: drain at a window's end nor start again at one at the next's start.
WINDOWS_IN_FLIGHT: Final = 4
#: Pages a window read ahead holds until its turn, at most (some 500 fills each): the walk's
#: memory beyond the window it yields is at most this for each window in flight, whatever the
#: account's size; a window that holds them waits, its requests left to the others.
WINDOW_PAGES_HELD: Final = 16

#: Fraction of a budget's rate the pacer allows: the rest (200 requests of 10,000 per 10 s, 0.2 s
#: at full rate) is room for requests that arrive later than they left.
PACING_HEADROOM: Final = 0.98
#: Most requests the pacer lets through at once before settling to its rate (fewer for a small
#: budget: burst + rate * period must stay under the budget with room to spare). It is also how
#: far behind its rate a walk may fall (a busy event loop, a GC pass) and still catch up, so a
#: throttled walk keeps close to its budget.
PACING_BURST: Final = 64

#: A window nonce never runs further than this ahead of the wall clock (the exchange refuses one
#: more than `spec.NONCE_WINDOW_MS` away); past it, the next request waits for the clock.
NONCE_MAX_LEAD_MS: Final = spec.NONCE_WINDOW_MS - 1_000

#: Pages each market's walk keeps ahead when several markets are walked at once.
PER_MARKET_PREFETCH_PAGES: Final = 2
#: A page that shows neither the walk's last record nor only records already behind it is
#: fetched again this many times before the walk gives up on the exchange's ordering.
MAX_REFETCHES: Final = 3
#: Pages in a row that bring no record new to a newest-first walk before it gives up: each such
#: page means a page of records arrived at the head meanwhile, and a funding round brings one per
#: market and position side (hundreds), never this many pages' worth. An exchange answering the
#: same records for every offset would otherwise keep a walk paging forever.
MAX_PAGES_WITHOUT_NEWS: Final = 100

#: Seconds ahead of the exchange's present at which a walk reckons the six-month floor of a
#: history: a request sent that much later (paced, retried) still starts at or after the
#: exchange's floor, which moves at 00:00 UTC. Within that minute before midnight the walk gives
#: up the oldest day a little early, and reports the cut.
FLOOR_MARGIN_S: Final = 60.0

#: Characters of an answer quoted in an error.
EXCERPT_CHARS: Final = 160

#: Times before this (2009-01-01, before any exchange existed) are not trusted for a walk's order
#: or window; the warehouse rejects them (warehouse.normalize.EARLIEST, the same day).
EARLIEST_TIME: Final = 1_230_768_000
#: Nor are times more than this after the clock (warehouse.normalize.FUTURE_TOLERANCE).
FUTURE_TOLERANCE_S: Final = 86_400
