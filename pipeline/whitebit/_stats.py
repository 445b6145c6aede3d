"""What a walk did: the numbers a caller logs, checks and shows as run metadata."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from ._errors import OffsetWindowExceeded, RecordsLeftOut


@dataclass(slots=True)
class WalkStats:
    """Counts of one walk, filled in as it runs; final once the walk has ended."""

    operation: str
    #: Pages answered successfully (a page fetched again counts again).
    pages: int = 0
    #: Records the walk yielded.
    rows: int = 0
    #: The slices walked, in order: ``all``, a market, or ``status=1,ticker=BTC``.
    slices: list[str] = field(default_factory=list)
    #: Attempts that failed and were tried again.
    retries: int = 0
    #: Answers with status 429 (the gateway's limit or a rejected nonce).
    rate_limited: int = 0
    #: Records dropped because the walk had already passed them (repeats across pages or
    #: slices, and entries that arrived at the head after the walk began).
    duplicates_dropped: int = 0
    #: Pages requested again because they did not line up with the page before them.
    refetches: int = 0
    elapsed_s: float = 0.0
    #: Slices that still filled the offset window; their oldest rows were not reachable.
    incomplete_slices: list[OffsetWindowExceeded] = field(default_factory=list)
    #: Answers that left records out, again when asked once more (a short page with more after
    #: it, a total not met): the walk read every other record, and raises the first at its end.
    left_out: list[RecordsLeftOut] = field(default_factory=list)
    #: Fields the spec does not name, seen in this walk's answers (the exchange added them): where,
    #: as a path such as ``records[].newField`` or ``BTC.newField``, to one example value as JSON
    #: text. They are tolerated: the rows load without them.
    unknown_fields: dict[str, str] = field(default_factory=dict)
    #: Anything else worth knowing (for example tickers the exchange did not recognise).
    notes: list[str] = field(default_factory=list)
    #: Seconds from a request's send (past the pacer and a free slot) to its whole answer, the
    #: shortest of the walk's requests (`note_round_trip`): the network's distance, which says
    #: how many requests a walk keeps in flight. None: nothing answered yet.
    round_trip_s: float | None = None
    #: The exchange's time of the first answer (its ``Date`` header, to the second): when the
    #: account was seen as the rows show it. None: no answer carried a date.
    observed_at: datetime | None = None
    #: The exchange's time of the last answer (its ``Date``): the rows show the account at an
    #: instant before ``observed_until`` + 1 s.
    observed_until: datetime | None = None
    #: The exchange's time known to have passed before the first request was sent (the ``Date``
    #: of the latest answer before it; else the first answer's): the rows show the account at
    #: an instant after it.
    observed_from: datetime | None = None
    #: This machine's clock (UTC) when the first request was sent and the last answer arrived.
    asked_at: datetime | None = None
    answered_at: datetime | None = None
    #: A history the exchange keeps for `spec.HISTORY_MONTHS` only: the floor the walk's range
    #: was cut at (nothing older was asked for, and a note says so). None: nothing was cut.
    cut_before: datetime | None = None

    @property
    def complete(self) -> bool:
        return not self.incomplete_slices

    def raise_left_out(self) -> None:
        """Raise the first answer that left records out, if any (the walk has yielded all)."""
        if self.left_out:
            raise self.left_out[0].again(len(self.left_out) - 1)

    @property
    def pages_per_s(self) -> float:
        return self.pages / self.elapsed_s if self.elapsed_s else 0.0

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.elapsed_s if self.elapsed_s else 0.0


def note_round_trip(stats: WalkStats, seconds: float) -> None:
    """One request's round trip: the walk's distance is its shortest. An answer queued behind
    others at the exchange takes longer; taken for distance, it would have a walk ask further
    ahead the longer the queue, and so the queue grow."""
    shortest = stats.round_trip_s
    stats.round_trip_s = seconds if shortest is None else min(shortest, seconds)
