"""What a history declares: the words of `_histories`.

A `History` is everything the product needs to know about one of the account's records: the
operation that answers it, how that operation pages (`NewestFirst`, `OffsetWindow`,
`TimeWindows`, or one call per value of a `Fanout`), the record's fields read into the columns of
a table (`Column`), the table's key and how it is partitioned (`Monthly` by the record's own time,
or one file per `Snapshot` day), and what its records do to the account's holdings (`Flow`,
`Change`). The client walks it, the warehouse normalizes, writes and catalogues it (its flows in
the views of the account's money), the Dagster application makes an asset of it for each account
and checks it, and the report counts it: each from the declaration, none with a branch of its own
for one history.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

from ._contract import Field, Operation, fractional

#: A column's source that is not a field of the record: the key it is listed under in its
#: answer (a ticker of a balance), or the value of the parameter it was asked for (a mining
#: account of its watcher links).
OWNER: Final = ("@owner",)


@dataclass(frozen=True, slots=True)
class Column:
    """One column of a history's table, and where its value comes from.

    ``source`` is the path of the record field it is read from (``("plan", "ticker")`` inside a
    nested object, ``("path", 0, "from")`` in the first object of an array of objects), `OWNER`,
    or empty for a column the warehouse derives (``sign_of`` or ``day_of``). A ``labels`` column
    (an integer status) comes with a ``<name>_label`` column beside it; ``labels_by`` gives the
    labels by the value of another column (a deposit's statuses are not a withdrawal's). A
    status or a text of ``choices`` outside the documented ones is a reject unless ``unlisted``
    is ``"keep"``: then it lands as received (its label null) and the ``unlisted_values`` check
    names it. A time is in the past (up to a day after the extraction) unless ``scheduled``
    (bounded by 2100 instead: a payment time, an expiry).
    """

    name: str
    description: str
    source: tuple[str | int, ...] = ()
    nullable: bool = False
    #: Text: the form a value must match (a regular expression), and its name in a reject.
    pattern: str | None = None
    form: str = ""
    allow_empty: bool = False
    labels: Mapping[int, str] | None = None
    labels_by: tuple[str, Mapping[int, Mapping[int, str]]] | None = None
    #: The documented values of a text column (an order's status, a transfer's direction).
    choices: tuple[str, ...] | None = None
    unlisted: Literal["reject", "keep"] = "reject"
    scheduled: bool = False
    #: Derived: ``"long"``/``"short"`` by the sign of this column's decimal value.
    sign_of: str | None = None
    #: Derived: the UTC day of this time column.
    day_of: str | None = None

    @property
    def derived(self) -> bool:
        return not self.source

    @property
    def labelled(self) -> bool:
        """It comes with a ``<name>_label`` column."""
        return self.labels is not None or self.labels_by is not None


@dataclass(frozen=True, slots=True)
class Monthly:
    """Partitioned by the UTC day of the record's own time (``day``, derived from ``time``), a
    file per account and month of it (the path names the month under ``month_path``)."""

    time: str
    day: str
    month_path: str


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The account as it is now: a file per account and ``snapshot_date``, the day it was taken."""


#: The one `Snapshot` partitioning.
SNAPSHOT: Final = Snapshot()


@dataclass(frozen=True, slots=True)
class NewestFirst:
    """Offset pages of a history the exchange lists newest first, new records arriving at its
    head while it is read. Pages overlap by a record, so that a shift is seen and neither a
    repeat nor a gap results. A record is known by its ``key`` fields, the sign of ``side``
    (a long and a short at one time), and its ``time``. Given values of the account's
    ``split_setting`` (its markets), each is walked on its own (sent as ``split_param``) and the
    walks merged newest first."""

    time: str
    key: tuple[str, ...]
    side: str | None = None
    split_param: str | None = None
    split_setting: str | None = None


@dataclass(frozen=True, slots=True)
class TimeWindows:
    """Offset pages within time windows (the operation's `TimeWindow`), the newest window first:
    whole UTC days, never across a month, each at most the operation's longest span. Pages shift
    while the account trades, so records are told apart by their ``identity`` fields and each is
    yielded once. A window whose pages would pass the operation's ``max_reach`` is split into
    shorter windows until each fits; a window of one second that still does not is reported out
    of reach, never cut silently. A history the exchange keeps `HISTORY_MONTHS` (the window has a
    floor) is never asked for before the floor: a range that reaches past it is cut to it, and the
    cut is reported."""

    identity: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Split:
    """A filter that narrows a slice: its values are the parameter's choices (a list parameter
    takes one at a time), else those seen in the records read so far at ``seen``, with those
    ``listed_by``'s answer gives (its keys, or each listed record's ``listed_at`` field). An
    ``owner`` split is the records' owner (the sub-account a transfer list belongs to): each value
    is always a slice of its own, and its records come under it, ``{value: [record, ...]}``."""

    param: str
    seen: tuple[str, ...] = ()
    listed_by: Operation | None = None
    listed_at: str = ""
    owner: bool = False


@dataclass(frozen=True, slots=True)
class OffsetWindow:
    """Offset pages up to the operation's largest offset and no further. The walk reads a slice
    per value of the first split; a slice whose last reachable page is full is split by the next,
    and one that still fills the window is reported out of reach, never silently cut. Records
    are told apart by ``identity`` across slices."""

    splits: tuple[Split, ...]
    identity: str
    #: The record's time, for a history partitioned by month: a walk of a range stops each slice
    #: once past the range's start and yields the range's records newest first.
    time: str | None = None
    #: The fields a record may change in while a walk reads it (a deposit's status, and what
    #: moves with it): read again under its identity and differing in these only, it is the same
    #: record in a later state, which the walk keeps in place of the earlier; differing in any
    #: other field, it is another record (both go on, and the warehouse rejects them).
    changing: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Fanout:
    """One call per value of the account's ``setting`` (its mining accounts), the value sent as
    ``param``; a snapshot of no value is empty."""

    param: str
    setting: str


@dataclass(frozen=True, slots=True)
class DailyCandles:
    """A market's daily candles, for each value of ``setting`` (the markets a price needs), sent
    as ``param``: whole days in windows of at most the operation's most candles a request, each
    window proved by its bound. The records come under their market, newest month first."""

    param: str
    setting: str


Paging = NewestFirst | OffsetWindow | TimeWindows | Fanout | DailyCandles


#: The kinds of flow, in the order the views of the account's money show them as columns: each
#: is the ``kind`` of a `Flow` or a `Change` of some history.
FLOW_KINDS: Final = (
    "deposits",
    "withdrawals",
    "withdrawals_returned",
    "spot_trades",
    "conversions",
    "funding",
    "realized_pnl",
    "position_fees",
    "transfers_in",
    "transfers_out",
    "interest",
)
#: The kinds that are money paid in or taken out (a contribution), not earned: what a return is
#: net of. A transfer between two accounts of the warehouse is both accounts' and nets across them.
CONTRIBUTION_KINDS: Final = (
    "deposits",
    "withdrawals",
    "withdrawals_returned",
    "transfers_in",
    "transfers_out",
)

#: How the account statement places a record's flow between snapshots T1 and T2: ``exact``, a
#: time to the microsecond, T1 < time <= T2; ``stamped``, a time in whole seconds (the second it
#: happened in), T1 <= time < T2; ``settled``, at the first snapshot after its creation that
#: does not list it in ``pending_flows`` (when it was credited is not in the history).
Timing = Literal["exact", "stamped", "settled"]


@dataclass(frozen=True, slots=True)
class Subaccount:
    """Whose holdings a main account's record moves: the sub-account whose id the record holds
    in ``column``, under the name of its alias on the main account's latest list of
    sub-accounts (the warehouse's account of that name)."""

    column: str


@dataclass(frozen=True, slots=True)
class Flow:
    """What each record of a history (each ``where`` is true of) does to the holdings of one
    asset: ``amount`` of ``ticker``, signed as it moves them, placed by ``timing`` at the
    record's time (its `Monthly` time).

    ``ticker``, ``amount``, ``where`` and ``fee`` are SQL over the history's table's columns. The
    holdings are those of the record's account, or of the sub-account it names (``account``).
    ``fee`` is the part of ``amount`` that is a fee the record charged (or gives back), signed as
    ``amount``: a tax tool's export puts it in its fee column.
    """

    kind: str
    ticker: str
    amount: str
    timing: Timing
    where: str = ""
    account: Subaccount | None = None
    fee: str = "0"


@dataclass(frozen=True, slots=True)
class Change:
    """A running total a snapshot shows (the interest paid so far): the flow of ``kind`` is the
    change of the ``total`` column's sum per ``ticker`` column since the account's snapshot
    before (a ticker without rows on a snapshot counting zero), placed at its snapshot."""

    kind: str
    ticker: str
    total: str


@dataclass(frozen=True, slots=True)
class History:
    """One of the account's histories (or snapshots), from the operation to the table."""

    name: str
    description: str
    operation: Operation
    columns: tuple[Column, ...]
    key: tuple[str, ...]
    partition: Monthly | Snapshot
    #: What its records do to the account's holdings: a `Flow` per movement a record makes (of a
    #: `Monthly` history), a `Change` of a snapshot's running total; ``()``, stated: they move
    #: nothing another history does not already tell. The statement's reconciliation fails on
    #: a movement no history declares.
    flows: tuple[Flow | Change, ...]
    #: How the operation is walked; None: one call answers all.
    paging: Paging | None = None
    #: A history made of objects nested in another's records (an investment's plan): not
    #: fetched on its own, but from each record of ``nested_in`` at ``nested_at``, each once.
    nested_in: History | None = None
    nested_at: str = ""
    #: The accounts-file switch without which an account does not extract it (B2B access).
    access: str | None = None
    #: Parameters sent with every request (the statuses a history of pending records asks for).
    params: Mapping[str, object] = field(default_factory=dict)
    #: A SQL condition on the table's columns true of a row that may still change (a deposit
    #: not final yet): the nightly run reads the months that hold one again.
    unsettled: str | None = None
    columns_by_name: Mapping[str, Column] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_name = {c.name: c for c in self.columns}
        if len(by_name) != len(self.columns):
            raise ValueError(f"history {self.name}: a column name appears twice")
        named = {*by_name, *(f"{c.name}_label" for c in self.columns if c.labelled)}
        missing = [k for k in self.key if k not in named and k != "snapshot_date"]
        if missing:
            raise ValueError(f"history {self.name}: its key names unknown columns {missing}")
        for column in self.columns:
            if column.source and column.source != OWNER:
                self.field_of(column)  # raises for a path the record does not have
        for flow in self.flows:
            self._check(flow, named)
        if isinstance(self.paging, OffsetWindow):
            fields = {f.name for f in self.record}
            unknown = set(self.paging.changing) - (fields - {self.paging.identity})
            if unknown:
                raise ValueError(
                    f"history {self.name}: its changing fields {sorted(unknown)} are not fields "
                    "of its record other than its identity"
                )
        object.__setattr__(self, "columns_by_name", by_name)

    def _check(self, flow: Flow | Change, named: set[str]) -> None:
        if flow.kind not in FLOW_KINDS:
            raise ValueError(f"history {self.name}: flow kind {flow.kind!r} is not in FLOW_KINDS")
        if isinstance(flow, Change):
            unknown = [c for c in (flow.ticker, flow.total) if c not in named]
            if self.monthly or unknown:
                raise ValueError(
                    f"history {self.name}: a Change is of a snapshot's columns ({unknown} unknown)"
                )
        elif not self.monthly:
            raise ValueError(f"history {self.name}: a Flow is of records with a time (Monthly)")
        elif flow.account is not None and flow.account.column not in named:
            raise ValueError(f"history {self.name}: no column {flow.account.column!r}")

    @property
    def record(self) -> tuple[Field, ...]:
        """The fields of one record (for a nested history, of the nested object)."""
        if self.nested_in is not None:
            parent = {f.name: f for f in self.nested_in.record}[self.nested_at]
            return parent.fields
        return self.operation.record

    @property
    def exact_numbers(self) -> bool:
        """Whether its records hold JSON numbers with a fraction (`fractional`): wherever they
        are parsed (an answer, the writer's pipe), those are read as `Decimal`s."""
        return fractional(self.record)

    def field_of(self, column: Column) -> Field:
        """The record field a column is read from."""
        (first, *rest) = column.source
        try:
            found = {f.name: f for f in self.record}[str(first)]
            return found.at(tuple(str(step) for step in rest if not isinstance(step, int)))
        except KeyError:
            path = ".".join(map(str, column.source))
            raise ValueError(
                f"history {self.name}: column {column.name} reads {path}, "
                "which its record does not have"
            ) from None

    @property
    def monthly(self) -> bool:
        return isinstance(self.partition, Monthly)

    @property
    def forgotten(self) -> bool:
        """The exchange answers only its last `HISTORY_MONTHS`: the warehouse is its archive."""
        window = self.operation.window
        return window is not None and window.floor is not None
