"""One account's ledger: every record that moves its balances, and the balances they sum to.

The ledger is made a funding round at a time (the 8 hours up to ``k * 8 h``), from the first
round of the funding history on, each round from the seed and the rounds before it: the
position changes its funding entries ask for, the spot orders of the last `SPOT_DAYS` days
before the epoch and every day since, the deposits and withdrawals, conversions and transfers.
A round is made once the clock enters it; its records are released to the histories (`Series`)
as the clock reaches their times, so a history grows only at its head and a past window
answers the same on every later day.

Balances are anchored at the epoch (`_assets.Holdings`): at the clock's present ``t`` each is its
anchor plus every move after the epoch up to ``t`` (or less every move between ``t`` and the
epoch, for a clock before it), summed exactly in integers of 10**-18. At the epoch itself no
move counts, so a balance there needs no ledger made. Investments end and are renewed after the
epoch, moving the main balance (`_investments`).
"""

from __future__ import annotations

import heapq
import itertools
import threading
from array import array
from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Sequence

from pipeline.spec import SimClock

from ._assets import COLLATERAL, MAIN, SETTLEMENT, Holdings
from ._basics import EPOCH, FUNDING_INTERVAL_S, MAIN_PROFILE, Profile, Scale, rng
from ._flows import Movement, Pairing, conversions, movements, transfers
from ._funding import PerpMarkets, Round
from ._investments import Investments
from ._positions import Held, Positions
from ._series import Series
from ._trades import (
    ID_STEP,
    Plan,
    balance_moves,
    merge,
    order_state,
    place,
    render_fills,
    render_order,
    spot_plans,
)
from ._windows import history_floor

#: Days of spot trading and conversions before the epoch: a little more than the six months the
#: API reaches back, so the floor bites.
SPOT_DAYS = 200
_ROUND_US = FUNDING_INTERVAL_S * 1_000_000
_EPOCH_US = EPOCH * 1_000_000


def _base(seed: int, start: int, stride: int) -> int:
    return start + (seed % 997) * stride


def _block(most: float) -> int:
    """A power of ten above ``most``: ids of one round fit in a block of that many."""
    size = 10
    while size <= most:
        size *= 10
    return size


class Ledger:
    """One account's ledger: its histories (`Series` of JSON records, as the clock sees them),
    its open positions, and the moves that make its balances."""

    def __init__(
        self,
        seed: int,
        scale: Scale,
        clock: SimClock,
        perp: PerpMarkets,
        holdings: Holdings,
        profile: Profile = MAIN_PROFILE,
        investments: Investments | None = None,
    ) -> None:
        self.seed, self.clock, self.perp, self.holdings = seed, clock, perp, holdings
        #: Its investments, whose ends and renewals move the main balance (`Investments.moves`),
        #: and how many of their moves the ledger has taken.
        self.investments = investments
        self._investment_moves = 0
        self.pairings: tuple[Pairing, ...] = tuple(profile.pairings)
        self.first_round = perp.first_round
        last = EPOCH // FUNDING_INTERVAL_S
        self.spot_from = max(self.first_round, last - min(scale.days, SPOT_DAYS) * 3 + 1)
        #: Spot orders of a round (some four fills each), deposits and withdrawals, conversions.
        self._orders_per_round = scale.fills / 3 / 4
        self._movements_per_round = max(3, scale.fills // 160) / 3
        self._conversions_per_round = max(1, scale.fills // 200) / 3
        #: Ids of a round's orders and fills: ``base + (k * block + n) * 3`` (+1, +2), so that
        #: any round's ids are known without making the rounds before it.
        self.order_block = _block(1.3 * self._orders_per_round + 2 * len(perp.markets) + 10)
        self.fill_block = 10 * self.order_block
        self.order_base = _base(seed, 10**12, 10**10)
        self.fill_base = _base(seed, 2 * 10**13, 10**11)
        self.positions = Positions(perp, _base(seed, 10**6, 10**5))
        self.fills = Series("market")
        self.orders = Series("market", "state")
        self.events = Series("market", "position")
        self.closed = Series()
        self.conversions = Series("from", "to", "quote")
        self.movements = Series("method", "ticker")
        self.transfers = Series("sub", "direction")
        #: Orders and fills are kept from the round the floor of the histories that have one
        #: was in when the ledger was first made: older ones no request can reach again.
        self._keep_from_round: int | None = None
        #: By order (its position in `orders`): its first fill's position and how many it had
        #: (first << 8 | count); orders by client order id. The rounds kept, and where each
        #: one's orders and fills start.
        self.order_fills = array("Q")
        self.client_orders: dict[str, int] = {}
        self._kept_rounds = array("Q")
        self._order_starts = array("Q")
        self._fill_starts = array("Q")
        self.fills.fill = lambda positions: self._write(positions, self._fill_starts)
        self.orders.fill = lambda positions: self._write(positions, self._order_starts)
        self._last_round: Round | None = None
        #: Kept rounds (by their index in `_kept_rounds`) whose records are written.
        self._written: set[int] = set()
        #: By movement number: its stages, and its (address, memo, uniqueId).
        self.stages: list[list[tuple[int, bytes, int]]] = []
        self.movement_keys: list[tuple[str, str, str | None]] = []
        self._conversion_ids = itertools.count(_base(seed, 4000, 10**4))
        self._movement_count = itertools.count()
        self._next_round = self.first_round
        self._lock = threading.RLock()
        #: Moves not yet released (time, sequence, component, asset, atoms); those at or before
        #: `_from_us` never count and are not kept.
        self._moves: list[tuple[int, int, str, str, int]] = []
        self._move_seq = itertools.count()
        self._from_us: int | None = None
        self._after: dict[tuple[str, str], int] = {}
        #: Position slots as the clock sees them, and the events not yet seen.
        self.open: dict[tuple[int, str], Held] = {}
        self._slot_updates: deque[tuple[int, tuple[int, str], Held | None]] = deque()
        self._marks: deque[tuple[int, list[int]]] = deque()
        self.marks: list[int] = []

    # --- making rounds ------------------------------------------------------------------

    def current(self) -> None:
        """Make the rounds the clock has entered (and, before the epoch, up to it), then
        release what the clock has reached."""
        with self._lock:
            now_us = int(self.clock.now() * 1_000_000)
            if self._from_us is None:
                self._from_us = min(now_us, _EPOCH_US)
                self._keep_from_round = history_floor(self.clock.now()) // FUNDING_INTERVAL_S
            until = max(now_us, _EPOCH_US)
            self._take_investment_moves()
            self._release(now_us)  # what earlier rounds staged comes first
            while (self._next_round - 1) * _ROUND_US < until:
                self._make(self._next_round, now_us)
                self._next_round += 1
                self._release(now_us)
            self._release(now_us)

    def _take_investment_moves(self) -> None:
        if self.investments is None:
            return
        self.investments.current()
        moves = self.investments.moves
        for time_us, asset, amount in moves[self._investment_moves :]:
            self._move(time_us, MAIN, asset, amount)
        self._investment_moves = len(moves)

    def _move(self, time_us: int, component: str, asset: str, amount: int) -> None:
        assert self._from_us is not None
        if time_us > self._from_us and amount:
            heapq.heappush(self._moves, (time_us, next(self._move_seq), component, asset, amount))

    def plan_round(self, k: int, round_of: Callable[[int], Round]) -> list[Plan]:
        """Round ``k``'s orders, placed: its position changes and (in the spot window) its spot
        orders, interleaved. The same every time, from the seed and the funding rounds
        ``k - 1`` and ``k`` (which ``round_of`` gives)."""
        draw = rng(self.seed, "round-orders", k)
        plans = self.positions.plans(k, round_of, draw)
        if k >= self.spot_from:
            wanted = self._orders_per_round * (0.8 + 0.4 * draw.random())
            spot = spot_plans(self.holdings.spot_markets, int(wanted), draw, f"o{k}")
            plans = merge(plans, spot, draw)
        ids = (
            self.order_base + k * self.order_block * ID_STEP + 1,
            self.fill_base + k * self.fill_block * ID_STEP + 2,
        )
        place(plans, ids, (k - 1) * _ROUND_US, k * _ROUND_US, draw)
        return plans

    def _make(self, k: int, now_us: int) -> None:
        assert self._keep_from_round is not None
        assert self._from_us is not None
        start_us, end_us = (k - 1) * _ROUND_US, k * _ROUND_US
        r = self.perp.round(k)
        last = self._last_round

        def round_of(j: int) -> Round:
            if j == k:
                return r
            return last if last is not None and last.k == j else self.perp.round(j)

        plans = self.plan_round(k, round_of)
        self._last_round = r
        for plan in plans:
            if plan.times[-1:] and plan.times[-1] > self._from_us:
                for j, at in enumerate(plan.times):
                    for component, asset, amount in balance_moves(plan, j):
                        self._move(at, component, asset, amount)
            if plan.event is not None:
                self._position_event(plan)
        if k >= self._keep_from_round:
            self._keep(k, plans, write=end_us > now_us)
        self._move(end_us, COLLATERAL, SETTLEMENT, self.positions.fund(r))
        self._marks.append((end_us, r.prices))
        for m in movements(
            self.holdings, self.seed, k, start_us, self._movements_per_round, self._movement_count
        ):
            self._stage_movement(m)
        if k >= self.spot_from:
            per_round, count = self._conversions_per_round, self._conversion_ids
            for c in conversions(self.holdings, self.seed, k, start_us, per_round, count):
                self.conversions.stage(c.time_us, c.record, c.give, c.receive, c.quote_id)
                for move in c.moves:
                    self._move(*move)
        for pairing in self.pairings:
            for t in transfers(pairing, k, start_us):
                if not pairing.sub:
                    self.transfers.stage(t.time_us, t.record, t.sub, t.direction)
                for move in t.moves:
                    self._move(*move)

    def _position_event(self, plan: Plan) -> None:
        applied = self.positions.apply(plan)
        at = plan.times[0]
        self.events.stage(at, applied.event, plan.market, applied.slot.position_id)
        self._move(at, COLLATERAL, SETTLEMENT, applied.pnl)
        state = None if applied.closed else applied.slot.held()
        self._slot_updates.append((at, plan.event.slot, state))
        if applied.closed is not None:
            close_us, _, record = applied.closed
            # Listed by the second it closed in: released at that second's end.
            self.closed.stage(close_us // 1_000_000 * 1_000_000 + 999_999, record)

    def _keep(self, k: int, plans: list[Plan], *, write: bool) -> None:
        """Put round ``k``'s orders and fills in their histories: written now if the clock is
        still in the round (staged, released as it passes them), else when first read
        (`_write`, the round's records released at once, unwritten)."""
        orders, fills = self.orders, self.fills
        self._kept_rounds.append(k)
        self._order_starts.append(len(orders) + len(orders.staged))
        self._fill_starts.append(len(fills) + len(fills.staged))
        first = len(fills) + len(fills.staged)
        for plan in plans:
            if plan.client_order_id:
                self.client_orders[plan.client_order_id] = len(self.order_fills)
            self.order_fills.append(first << 8 | len(plan.fills))
            first += len(plan.fills)
        if not write:
            times = [t for plan in plans for t in plan.times]
            markets = [plan.market for plan in plans for _ in plan.fills]
            fills.extend(times, [None] * len(times), markets)
            orders.extend(
                [plan.ftime for plan in plans],
                [None] * len(plans),
                [plan.market for plan in plans],
                [order_state(plan) for plan in plans],
            )
            return
        self._written.add(len(self._kept_rounds) - 1)
        for plan in plans:
            for time_us, fill in zip(plan.times, render_fills(plan), strict=True):
                fills.stage(time_us, fill, plan.market)
            orders.stage(plan.ftime, render_order(plan), plan.market, order_state(plan))

    def _write(self, positions: Sequence[int], starts: array[int]) -> None:
        """Write the rounds holding these positions (of the fills, or of the orders, whose
        rounds start at ``starts``) if they are not written yet."""
        with self._lock:
            for k_index in sorted({bisect_right(starts, i) - 1 for i in positions}):
                if k_index in self._written:
                    continue
                self._written.add(k_index)
                plans = self.plan_round(self._kept_rounds[k_index], self.perp.round)
                fill_at, order_at = self._fill_starts[k_index], self._order_starts[k_index]
                for plan in plans:
                    for fill in render_fills(plan):
                        self.fills.records[fill_at] = fill
                        fill_at += 1
                    self.orders.records[order_at] = render_order(plan)
                    order_at += 1

    def _stage_movement(self, m: Movement) -> None:
        self.movements.stage(m.created_us, m.stages[-1][1], m.method, m.ticker)
        self.stages.append(m.stages)
        self.movement_keys.append((m.address, m.memo, m.unique_id))
        for move in m.moves:
            self._move(*move)

    # --- releasing --------------------------------------------------------------------

    def _release(self, now_us: int) -> None:
        for series in (
            self.fills,
            self.orders,
            self.events,
            self.closed,
            self.conversions,
            self.movements,
            self.transfers,
        ):
            series.release(now_us)
        moves, after = self._moves, self._after
        while moves and moves[0][0] <= now_us:
            time_us, _, component, asset, amount = heapq.heappop(moves)
            if time_us > _EPOCH_US:
                after[(component, asset)] = after.get((component, asset), 0) + amount
        updates = self._slot_updates
        while updates and updates[0][0] <= now_us:
            _, key, state = updates.popleft()
            if state is None:
                self.open.pop(key, None)
            else:
                self.open[key] = state
        while self._marks and self._marks[0][0] <= now_us:
            self.marks = self._marks.popleft()[1]

    def order_at(self, k: int, n: int, floor_us: int) -> int | None:
        """Where order ``n`` of round ``k`` is in the order history, if it is there (kept,
        final by the clock, not older than ``floor_us``)."""
        with self._lock:
            index = bisect_right(self._kept_rounds, k) - 1
            if index < 0 or self._kept_rounds[index] != k:
                return None
            start = self._order_starts[index]
            if index + 1 < len(self._order_starts):
                end = self._order_starts[index + 1]
            else:
                end = len(self.order_fills)
            position = start + n
            if n >= end - start or position >= len(self.orders):
                return None
            return position if self.orders.times[position] >= floor_us else None

    # --- balances -----------------------------------------------------------------------

    def balance(self, component: str, asset: str) -> int:
        """The balance at the clock's present, in atoms."""
        return self.balances().get((component, asset), 0)

    def balances(self) -> dict[tuple[str, str], int]:
        """Every balance at the clock's present, in atoms: each anchor and what moved since."""
        anchors = self.holdings.anchors
        now_us = int(self.clock.now() * 1_000_000)
        if now_us == _EPOCH_US:
            return dict(anchors)
        self.current()
        with self._lock:
            out = dict(anchors)
            for key, amount in self._after.items():
                out[key] = out.get(key, 0) + amount
            if now_us < _EPOCH_US:  # take away what moves between now and the epoch
                for time_us, _, component, asset, amount in self._moves:
                    if time_us <= _EPOCH_US:
                        out[(component, asset)] = out.get((component, asset), 0) - amount
            return out

    def status(self, number: int, now_us: int) -> tuple[bytes, int]:
        """A movement's record and status as the clock sees them."""
        stages = self.stages[number]
        shown = stages[0]
        for stage in stages:
            if stage[0] > now_us:
                break
            shown = stage
        return shown[1], shown[2]
