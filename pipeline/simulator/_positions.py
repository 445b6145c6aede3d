"""Collateral positions, derived from the funding history: its entries say, at each funding time,
how large each position is; whatever changed it since the previous funding time is an order of
one fill on that market, placed in between.

A position is a slot of a market: ``BOTH`` in one-way mode (its amount signed, negative when
short), or ``LONG`` and ``SHORT`` in hedge mode. When an entry's size differs from the slot's,
the slot is increased or reduced to it; when its sign flips, the position closes and a new one
opens; at the switch to hedge mode every one-way position closes and the hedge ones open. Each
funding entry is paid on the slot holding its position.

Each change is an event of `positions/history`; a reduction realizes ``amount * (price -
basePrice)`` (for a long; the opposite for a short) on the collateral balance, each fill pays
its fee there, and each funding entry its ``fundingAmount``. A closed position's aggregate
(`positions/closed-pnl`) sums its events: ``grossPnl`` is its realized P&L less its fees,
``netPnl`` adds its funding (``totalFunding`` is the funding paid, minus the entries' sum).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from operator import add, mul
from typing import NamedTuple

from ._assets import SETTLEMENT
from ._basics import ATOM_PLACES, TEN, atoms_text, decimal_text, time_text
from ._funding import PerpMarkets, Round
from ._trades import PERP_FEES, Plan

_EVENT = (
    '{"positionId":%d,"market":"%s","openDate":%s,"modifyDate":%s,"amount":"%s",'
    '"basePrice":"%s","realizedFunding":"%s","liquidationPrice":%s,"liquidationState":null,'
    '"orderDetail":{"id":%d,"tradeAmount":"%s","price":"%s","tradeFee":"%s","fundingFee":%s,'
    '"realizedPnl":%s},"side":"%s","isHedge":%s}'
)
_CLOSED = (
    '{"positionId":%d,"market":"%s","grossPnl":"%s","netPnl":"%s","totalTradeFee":"%s",'
    '"totalFunding":"%s","avgEntryPrice":"%s","avgExitPrice":"%s","closedSize":"%s",'
    '"amount":"0","side":"%s","isHedge":%s,"openDate":%d,"closeDate":%d}'
)


@dataclass(slots=True)
class Slot:
    """One open position: its running state, in its market's places."""

    position_id: int
    market: int
    side: str
    hedge: bool
    #: Signed, at the market's position places.
    amount: int = 0
    #: Average entry price, at `Positions.base_places`.
    base: int = 0
    open_us: int = 0
    modify_us: int = 0
    #: Sums in atoms: funding entries (all, and since the last event), realized P&L, fees.
    funding: int = 0
    funding_since: int | None = None
    pnl: int = 0
    fees: int = 0
    #: Amounts reduced (position places) and their value (position + price places).
    closed: int = 0
    exit_value: int = 0

    def held(self) -> Held:
        return Held(
            self.position_id,
            self.market,
            self.side,
            self.amount,
            self.base,
            self.open_us,
            self.modify_us,
            self.pnl,
        )


class Held(NamedTuple):
    """An open position as the clock last saw it: what `positions/open` answers from."""

    position_id: int
    market: int
    side: str
    amount: int
    base: int
    open_us: int
    modify_us: int
    pnl: int


@dataclass(frozen=True, slots=True)
class Change:
    """What an order does to a slot: adds ``delta`` (signed, position places) to its amount,
    bringing it nearer zero (``reduces``) or away from it."""

    slot: tuple[int, str]
    delta: int
    reduces: bool


@dataclass(frozen=True, slots=True)
class Applied:
    """An event made: its `positions/history` record, the closed position's aggregate if it
    closed one, and the collateral it moved (its realized P&L, in atoms)."""

    event: bytes
    closed: tuple[int, int, bytes] | None
    pnl: int
    slot: Slot


class Positions:
    """Every slot of the account's collateral markets, moved round by round."""

    def __init__(self, perp: PerpMarkets, id_base: int) -> None:
        self.perp = perp
        self.slots: dict[tuple[int, str], Slot] = {}
        self._next_id = id_base
        #: Position sizes take a few values per market: each written once.
        self._sizes: dict[tuple[int, int], str] = {}
        #: The slots of the entries since positions last changed, each entry's factor to
        #: atoms, and what each has paid since (`fund`).
        self._keys: list[tuple[int, str]] | None = None
        self._factors: list[int] = []
        self._owed: list[int] = []
        self._paid = False
        #: Places of each market's basePrice: its price's and six more, at most 18 with the
        #: position's (so a realized P&L is exact).
        self.base_places = tuple(
            min(m.price[1] + 6, ATOM_PLACES - m.position[1]) for m in perp.markets
        )

    def _side(self, k: int, position: int) -> str:
        if not self.perp.hedged(k):
            return "BOTH"
        return "LONG" if position > 0 else "SHORT"

    def _targets(self, r: Round) -> dict[tuple[int, str], int]:
        """Each slot's position as round ``r``'s funding entries pay it."""
        return {(i, self._side(r.k, position)): position for i, position, _ in r.entries}

    def plans(self, k: int, round_of: Callable[[int], Round], draw: random.Random) -> list[Plan]:
        """The orders that bring every slot from round ``k - 1``'s positions to round ``k``'s,
        market by market: a market's reductions and closings before its increases and openings.
        They depend on those two rounds alone (``round_of`` gives them), so a round is planned
        alike whenever it is asked for."""
        perp = self.perp
        if not perp.changes(k):
            return []
        r = round_of(k)
        targets = self._targets(r)
        before = self._targets(round_of(k - 1)) if k > perp.first_round else {}
        changes: list[Change] = []
        for key in sorted(set(before) | set(targets)):
            held = before.get(key, 0)
            wanted = targets.get(key, 0)
            if held == wanted:
                continue
            if held and (not wanted or (held > 0) != (wanted > 0)):
                changes.append(Change(key, -held, reduces=True))
                held = 0
            if wanted != held:
                changes.append(Change(key, wanted - held, reduces=abs(wanted) < abs(held)))
        # Within a market, every reduction first (a flip closes before it opens).
        changes.sort(key=lambda c: (c.slot[0], not c.reduces))
        return [self._plan(r, change, draw) for change in changes]

    def _plan(self, r: Round, change: Change, draw: random.Random) -> Plan:
        i, side = change.slot
        market = self.perp.markets[i]
        pm = r.prices[i]
        price = max(1, pm + int((draw.random() - 0.5) * pm / 200))
        role = 1 if draw.random() < 0.2 else 2
        return Plan(
            market=market.name,
            side="buy" if change.delta > 0 else "sell",
            type="limit" if role == 1 else "market",
            status="FILLED",
            fee_asset=SETTLEMENT,
            fee_rates=PERP_FEES,
            fills=[(abs(change.delta), price, role)],
            fill_places=market.position[1],
            price_places=market.price[1],
            price=price if role == 1 else 0,
            reduce_only=change.reduces,
            position_side=side,
            event=change,
        )

    def apply(self, plan: Plan) -> Applied:
        """Make the event of a placed plan (its one fill's time and fee are known)."""
        self._flush()
        change: Change = plan.event
        amount, x, _ = plan.fills[0]
        qs, ps = plan.fill_places, plan.price_places
        time_us, charged = plan.times[0], plan.fee(0)
        i, side = change.slot
        places = self.base_places[i]
        slot = self.slots.get(change.slot)
        if slot is None:
            slot = self.slots[change.slot] = Slot(
                self._next_id, i, side, hedge=side != "BOTH", open_us=time_us
            )
            self._next_id += 1
        held = abs(slot.amount)
        price = x * TEN[places - ps]
        pnl: int | None = None
        if change.reduces:
            direction = 1 if slot.amount > 0 else -1
            pnl = amount * (price - slot.base) * direction * TEN[ATOM_PLACES - qs - places]
            slot.pnl += pnl
            slot.closed += amount
            slot.exit_value += amount * price
        else:
            slot.base = (held * slot.base + amount * price + (held + amount) // 2) // (
                held + amount
            )
        slot.amount += change.delta
        slot.modify_us = time_us
        slot.fees += charged * TEN[ATOM_PLACES - plan.fee_places]
        market = self.perp.markets[i]
        since = None if slot.funding_since is None else atoms_text(slot.funding_since)
        slot.funding_since = None
        liquidation = None
        if slot.amount:  # a fifth of the entry price away
            factor = 8 if slot.amount > 0 else 12
            liquidation = decimal_text(slot.base * factor // 10, places)
        sizes = self._sizes
        event = _EVENT % (
            slot.position_id,
            market.name,
            time_text(slot.open_us),
            time_text(time_us),
            sizes.get((slot.amount, qs))
            or sizes.setdefault((slot.amount, qs), decimal_text(slot.amount, qs)),
            decimal_text(slot.base, places),
            atoms_text(slot.funding),
            _quoted(liquidation),
            plan.order_id,
            sizes.get((amount, qs)) or sizes.setdefault((amount, qs), decimal_text(amount, qs)),
            decimal_text(x, ps),
            decimal_text(charged, plan.fee_places),
            _quoted(since),
            _quoted(None if pnl is None else atoms_text(pnl)),
            side,
            _bool(slot.hedge),
        )
        closed = None
        if slot.amount == 0:
            del self.slots[change.slot]
            closed = (time_us, slot.position_id, self._closed(slot, time_us))
        return Applied(event.encode(), closed, pnl or 0, slot)

    def _closed(self, slot: Slot, close_us: int) -> bytes:
        market = self.perp.markets[slot.market]
        qs, places = market.position[1], self.base_places[slot.market]
        gross = slot.pnl - slot.fees
        exit_price = (slot.exit_value + slot.closed // 2) // slot.closed if slot.closed else 0
        return (
            _CLOSED
            % (
                slot.position_id,
                market.name,
                atoms_text(gross),
                atoms_text(gross + slot.funding),
                atoms_text(slot.fees),
                atoms_text(-slot.funding),
                decimal_text(slot.base, places),
                decimal_text(exit_price, places),
                decimal_text(slot.closed, qs),
                slot.side,
                _bool(slot.hedge),
                slot.open_us // 1_000_000,
                close_us // 1_000_000,
            )
        ).encode()

    def fund(self, r: Round) -> int:
        """Pay round ``r``'s funding entries to the slots holding their positions; their sum,
        in atoms (what the collateral balance receives at the funding time).

        Between two rounds that change positions every round's entries are the same slots in
        the same order, so each entry's payments are summed in a list, in C, and paid to its
        slot when positions next change (`_flush`)."""
        if self._keys is None or self.perp.changes(r.k):
            self._flush()
            scales = self.perp.amount_scales
            self._keys = [(i, self._side(r.k, position)) for i, position, _ in r.entries]
            self._factors = [10 ** (ATOM_PLACES - scales[i]) for i, _, _ in r.entries]
            self._owed = [0] * len(self._keys)
            self._paid = False
        paid = list(map(mul, [amount for _, _, amount in r.entries], self._factors))
        self._owed = list(map(add, self._owed, paid))
        self._paid = True
        return sum(paid)

    def _flush(self) -> None:
        """Pay each slot what its entries paid since positions last changed."""
        if self._keys is None or not self._paid:
            return
        for key, owed in zip(self._keys, self._owed, strict=True):
            slot = self.slots[key]
            slot.funding += owed
            slot.funding_since = owed + (slot.funding_since or 0)
        self._owed = [0] * len(self._keys)
        self._paid = False


def _quoted(text: str | None) -> str:
    """A JSON string of digits, or null."""
    return "null" if text is None else f'"{text}"'


def _bool(value: bool) -> str:
    return "true" if value else "false"
