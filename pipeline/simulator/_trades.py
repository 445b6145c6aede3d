"""Orders and their fills: the spot trading of a round, and how an order (spot or collateral)
is written once placed.

An order is planned whole (`Plan`: its market, side, type and fills, each fill's amount, price
and role) and then placed on the round's timeline (`place`): never overlapping another, its
fills inside its slice of the round. So an order's fills are consecutive in the account's fills,
ids rise with time, and the order is final (in the order history) once its last fill or its
cancellation has passed. Its dealStock, dealMoney and dealFee are the sums of its fills. Ids
come from the round and the order's place in it, so a round is planned and placed alike from
its seed whenever it is asked for (`_ledger` writes a round's records when first read).

Spot orders come in round trips: a buy, then a sale of exactly what the buy received (its
amount less its fee, which a buy pays in the base asset), so the account's holding of the base
asset never drifts and its quote asset pays only fees and spreads. A sale pays its fee in the
quote asset. Fee rates are 0.1 % for a taker and 0.08 % for a maker (0.05 % and 0.02 % on
collateral markets, paid in the settlement asset).

Amounts are integer mantissas at fixed places: a fill's amount at ``fill_places``, its price at
``price_places``, its deal at both summed, its fee four places more (the rates have four).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from ._assets import COLLATERAL, TRADING, SpotMarket
from ._basics import ATOM_PLACES, decimal_text, time_text

#: Ids are sparse, as an exchange's are: this far apart.
ID_STEP = 3
#: Fee rates by role (1 maker, 2 taker), at 4 places.
SPOT_FEES = {1: 8, 2: 10}
PERP_FEES = {1: 2, 2: 5}
FEE_PLACES = 4

_FILL = (
    '{"id":%d,"clientOrderId":"%s","time":%d.%06d,"side":"%s","role":%d,"amount":"%s",'
    '"price":"%s","deal":"%s","fee":"%s","orderId":%d,"feeAsset":"%s"}'
)
_ORDER = (
    '{"amount":"%s","price":"%s","type":"%s","id":%d,"clientOrderId":"%s","side":"%s",'
    '"ctime":%s,"ftime":%s,"dealFee":"%s","dealStock":"%s","dealMoney":"%s",'
    '"postOnly":%s,"ioc":%s%s,"status":"%s","feeAsset":"%s"%s,"rpi":%s,"reduceOnly":%s}'
)


@dataclass(slots=True)
class Plan:
    """One order of a round, before it is placed; then its order id, fill times and fees."""

    market: str
    side: str
    type: str
    status: str
    fee_asset: str
    fee_rates: dict[int, int]
    #: (amount, price, role) of each fill, at ``fill_places`` and ``price_places``.
    fills: list[tuple[int, int, int]]
    fill_places: int
    price_places: int
    #: Its limit price at ``price_places`` (0 for a market order).
    price: int = 0
    #: As order history lists it (a market buy: the quote it spent) when not its fills' sum.
    listed: tuple[int, int] | None = None
    #: The fee is charged on the fill's amount (a spot buy) rather than its deal.
    fee_on_amount: bool = False
    spot: SpotMarket | None = None
    client_order_id: str = ""
    post_only: bool = False
    ioc: bool = False
    reduce_only: bool = False
    position_side: str | None = None
    #: A stop order's (activation price, condition).
    stop: tuple[int, str] | None = None
    #: What the positions make of it (`_positions.Change`); None for spot.
    event: Any = None
    #: Once placed: its id and its first fill's (the others follow, `ID_STEP` apart), when it
    #: was made and became final, and when each fill happened.
    order_id: int = 0
    first_fill_id: int = 0
    ctime: int = 0
    ftime: int = 0
    times: list[int] = field(default_factory=list)

    @property
    def fee_places(self) -> int:
        places = self.fill_places if self.fee_on_amount else self.fill_places + self.price_places
        return places + FEE_PLACES

    def fee(self, index: int) -> int:
        amount, price, role = self.fills[index]
        return (amount if self.fee_on_amount else amount * price) * self.fee_rates[role]


def _split(total: int, parts: int, draw: random.Random) -> list[int]:
    """``total`` split into at most ``parts`` positive integers."""
    if parts <= 1 or total < parts:
        return [total]
    random_ = draw.random
    weights = [0.2 + random_() for _ in range(parts)]
    scale = total / sum(weights)
    out = [max(1, int(w * scale)) for w in weights[1:]]
    first = total - sum(out)
    return [first, *out] if first > 0 else [total]


def spot_plans(
    markets: tuple[SpotMarket, ...], orders: int, draw: random.Random, tag: str
) -> list[Plan]:
    """About ``orders`` spot orders (some four fills each): round trips, and now and then one
    canceled unfilled."""
    plans: list[Plan] = []
    n = 0
    while len(plans) < orders and markets:
        market = markets[int(draw.random() * len(markets))]
        n += 1
        if draw.random() < 0.08:  # canceled before a fill, by its owner or by self-trade
            plans.append(_lone(market, draw, f"{tag}-{n}" if n % 2 else ""))
            continue
        buy = _buy(market, draw, f"{tag}-{n}" if draw.random() < 0.25 else "")
        plans.append(buy)
        # What the buy received: its amounts less their fees, at four places more.
        received = sum(a * 10**FEE_PLACES - a * buy.fee_rates[r] for a, _, r in buy.fills)
        if received > 0:
            plans.append(_sell(market, received, draw))
    return plans


def _near(market: SpotMarket, draw: random.Random, spread: float) -> int:
    """A price about ``spread`` around the market's (at most 0.1: a twentieth either side),
    kept inside its `SpotMarket.band`, which its candles span."""
    low, high = market.band
    price = market.price[0] + int(market.price[0] * (draw.random() - 0.5) * spread)
    return min(high, max(low, price))


def _amount(market: SpotMarket, price: int, draw: random.Random) -> int:
    """From about 10 to 30,000 USDT worth (the quote's worth, for a market quoted in BTC)."""
    value = (10, 50, 200, 1_000, 5_000, 20_000)[int(draw.random() * 6)] * (0.5 + draw.random())
    if market.quote != "USDT":
        value /= 84_123.5
    units = value / (price / 10 ** market.price[1]) * 10**market.amount_places
    return max(1, int(units))


_KINDS = ("limit",) * 14 + ("market", "market", "stock market", "stop limit", "stop limit")


def _buy(market: SpotMarket, draw: random.Random, client_order_id: str) -> Plan:
    random_ = draw.random
    price = _near(market, draw, 0.1)
    amount = _amount(market, price, draw)
    kind = _KINDS[int(random_() * len(_KINDS))]
    # Mostly filled; a limit order now and then canceled part way.
    partial = kind == "limit" and random_() < 0.12
    filled = amount if not partial else max(1, amount * (10 + int(random_() * 80)) // 100)
    post_only = kind == "limit" and random_() < 0.3
    limit = kind in ("limit", "stop limit")
    fills = []
    for part in _split(filled, (1, 3, 4, 5, 6, 6)[int(random_() * 6)], draw):
        at = price if limit else _near(market, draw, 0.002)
        role = 1 if post_only or (kind == "limit" and random_() < 0.4) else 2
        fills.append((part, at, role))
    places = market.amount_places
    plan = Plan(
        market=market.name,
        side="buy",
        type=kind,
        status="CANCELED" if partial else "FILLED",
        fee_asset=market.base,
        fee_rates=SPOT_FEES,
        fills=fills,
        fill_places=places,
        price_places=market.price[1],
        price=price if limit else 0,
        fee_on_amount=True,
        spot=market,
        client_order_id=client_order_id,
        post_only=post_only,
        ioc=kind == "limit" and not post_only and random_() < 0.1,
    )
    if kind == "market":  # a market buy is asked for in the quote asset: what it spent
        plan.listed = (sum(a * p for a, p, _ in fills), places + market.price[1])
    elif partial:
        plan.listed = (amount, places)
    if kind == "stop limit":
        plan.stop = (_near(market, draw, 0.02), "<=" if random_() < 0.5 else ">=")
    return plan


def _sell(market: SpotMarket, amount: int, draw: random.Random) -> Plan:
    """Sell exactly ``amount`` (what a buy received, at four places more) at a limit."""
    price = _near(market, draw, 0.1)
    fills = [(part, price, 1 if draw.random() < 0.5 else 2)
             for part in _split(amount, (2, 3, 4, 6)[int(draw.random() * 4)], draw)]  # fmt: skip
    return Plan(
        market=market.name,
        side="sell",
        type="limit",
        status="FILLED",
        fee_asset=market.quote,
        fee_rates=SPOT_FEES,
        fills=fills,
        fill_places=market.amount_places + FEE_PLACES,
        price_places=market.price[1],
        price=price,
        spot=market,
    )


def _lone(market: SpotMarket, draw: random.Random, client_order_id: str) -> Plan:
    price = _near(market, draw, 0.1)
    side = "buy" if draw.random() < 0.5 else "sell"
    return Plan(
        market=market.name,
        side=side,
        type="limit",
        status="CANCELED_STP" if draw.random() < 0.3 else "CANCELED",
        fee_asset=market.base if side == "buy" else market.quote,
        fee_rates=SPOT_FEES,
        fills=[],
        fill_places=market.amount_places,
        price_places=market.price[1],
        price=price,
        listed=(_amount(market, price, draw), market.amount_places),
        spot=market,
        client_order_id=client_order_id,
        post_only=True,
    )


def order_state(plan: Plan) -> str:
    """How the status filter of order history sees it: filled, canceled, or partial (canceled
    after some fills)."""
    if plan.status == "FILLED":
        return "filled"
    return "partial" if plan.fills else "canceled"


def render_fills(plan: Plan) -> list[bytes]:
    """The fills of a placed order, as executed history lists them."""
    fp, pp, fee_places = plan.fill_places, plan.price_places, plan.fee_places
    rates, on_amount = plan.fee_rates, plan.fee_on_amount
    out = []
    price_text, last_price = "", -1
    fill_id = plan.first_fill_id
    for (amount, price, role), time_us in zip(plan.fills, plan.times, strict=True):
        if price != last_price:
            price_text, last_price = decimal_text(price, pp), price
        deal = amount * price
        seconds, micros = divmod(time_us, 1_000_000)
        out.append(
            (
                _FILL
                % (
                    fill_id,
                    plan.client_order_id,
                    seconds,
                    micros,
                    plan.side,
                    role,
                    decimal_text(amount, fp),
                    price_text,
                    decimal_text(deal, fp + pp),
                    decimal_text((amount if on_amount else deal) * rates[role], fee_places),
                    plan.order_id,
                    plan.fee_asset,
                )
            ).encode()
        )
        fill_id += ID_STEP
    return out


def render_order(plan: Plan) -> bytes:
    fp, pp = plan.fill_places, plan.price_places
    ctime_us, ftime_us = plan.ctime, plan.ftime
    stock = sum(a for a, _, _ in plan.fills)
    stock_text = decimal_text(stock, fp)
    amount = stock_text if plan.listed is None else decimal_text(*plan.listed)
    stop = ""
    if plan.stop is not None:
        activation, condition = decimal_text(plan.stop[0], pp), plan.stop[1]
        stop = (
            f',"activated":{ctime_us // 1_000_000},"activationPrice":"{activation}",'
            f'"activationCondition":"{condition}"'
        )
    side = "" if plan.position_side is None else f',"positionSide":"{plan.position_side}"'
    return (
        _ORDER
        % (
            amount,
            decimal_text(plan.price, pp),
            plan.type,
            plan.order_id,
            plan.client_order_id,
            plan.side,
            time_text(ctime_us),
            time_text(ftime_us),
            decimal_text(sum(plan.fee(j) for j in range(len(plan.fills))), plan.fee_places),
            stock_text,
            decimal_text(sum(a * p for a, p, _ in plan.fills), fp + pp),
            _bool(plan.post_only),
            _bool(plan.ioc),
            stop,
            plan.status,
            plan.fee_asset,
            side,
            "false",
            _bool(plan.reduce_only),
        )
    ).encode()


def _bool(value: bool) -> str:
    return "true" if value else "false"


def balance_moves(plan: Plan, index: int) -> list[tuple[str, str, int]]:
    """(component, asset, atoms) a placed order's fill moves; a collateral fill moves only its
    fee (its realized P&L is the position's, `_positions`)."""
    amount, price, _ = plan.fills[index]
    charged = plan.fee(index) * 10 ** (ATOM_PLACES - plan.fee_places)
    spot = plan.spot
    if spot is None:
        return [(COLLATERAL, plan.fee_asset, -charged)]
    to_atoms = 10 ** (ATOM_PLACES - plan.fill_places)
    deal = amount * price * 10 ** (ATOM_PLACES - plan.fill_places - plan.price_places)
    if plan.side == "buy":
        return [(TRADING, spot.base, amount * to_atoms - charged), (TRADING, spot.quote, -deal)]
    return [(TRADING, spot.base, -amount * to_atoms), (TRADING, spot.quote, deal - charged)]


def merge(first: list[Plan], second: list[Plan], draw: random.Random) -> list[Plan]:
    """Both lists interleaved at random, each keeping its order."""
    out: list[Plan] = []
    i = j = 0
    while i < len(first) or j < len(second):
        left, right = len(first) - i, len(second) - j
        if right == 0 or (left and draw.random() * (left + right) < left):
            out.append(first[i])
            i += 1
        else:
            out.append(second[j])
            j += 1
    return out


def place(
    plans: list[Plan], ids: tuple[int, int], start_us: int, end_us: int, draw: random.Random
) -> None:
    """Give each order of a round its slice of it, in turn, its fills inside the slice, and
    its ids: the orders' from ``ids[0]`` and the fills' from ``ids[1]``, `ID_STEP` apart."""
    random_ = draw.random
    slot = (end_us - start_us) // (len(plans) + 1)
    order_id, fill_id = ids
    for n, plan in enumerate(plans):
        plan.ctime = at = start_us + n * slot + int(random_() * slot / 4) + 1
        plan.order_id, plan.first_fill_id = order_id, fill_id
        order_id += ID_STEP
        fill_id += ID_STEP * len(plan.fills)
        step = slot // 2 // (len(plan.fills) + 1)
        times = plan.times
        for _ in plan.fills:
            at += 1 + int(random_() * step)
            times.append(at)
        plan.ftime = at if plan.fills else at + slot // 2 + int(random_() * slot / 10)
