"""Money in and out of the main balance: deposits and withdrawals, conversions, and transfers
between a main account and its sub-accounts, a round at a time.

A deposit credits ``amount - fee`` to the main balance when it becomes successful (3 or 7); one
canceled never moves it. A withdrawal takes ``amount + fee`` when it is made, whatever its status
(the exchange holds the funds), and gives them back if it ends canceled (4). Every record
reaches a final status within two days of its ``createdAt``; until then it moves through the
documented pending, held and unconfirmed statuses (`_LIFECYCLES`), each record in its place:
the history is ordered by ``createdAt``, which never changes.

A conversion takes ``give`` of one ticker and credits ``receive = give * rate`` of another. A
transfer moves its amount from one account's main balance to the other's, the same record in
both ledgers (drawn from the sub-account's seed).
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pipeline import spec

from ._assets import CURRENCIES, MAIN, NETWORKS, Holdings, usdt_amount
from ._basics import Decimal, atoms, decimal_text, dumps, new_uuid, rng, time_uuid

_HOUR_US = 3_600_000_000


def _times(draw: random.Random, start_us: int, count: int) -> list[int]:
    """``count`` moments of the round from ``start_us``, in order, none on a whole second: a
    record stamped in whole seconds happened after the second it names began."""
    times = sorted(start_us + draw.randrange(8 * _HOUR_US) for _ in range(count))
    return [t + 1 if t % 1_000_000 == 0 else t for t in times]


@dataclass(frozen=True, slots=True)
class Pairing:
    """Transfers between a main account and one of its sub-accounts: the sub-account's name,
    seed and id, seen from the main account (``sub=False``) or from the sub-account."""

    name: str
    seed: int
    id: str
    sub: bool


def subaccount_id(seed: int) -> str:
    """A sub-account's id, from its seed."""
    return new_uuid(rng(seed, "subaccount-id"))


#: Lifecycles of a record: (hours after the previous status, status), the first at creation.
#: Deposits end credited (3, 7) or canceled (4, 9); withdrawals sent (3, 7) or canceled (4).
_LIFECYCLES: dict[int, tuple[tuple[tuple[float, int], ...], ...]] = {
    1: (
        ((0, 3),),
        ((0, 15), (0.5, 3)),
        ((0, 7),),
        ((0, 15), (2, 3)),
        ((0, 15), (6, 4)),
        ((0, 5), (20, 9)),
        ((0, 3),),
        ((0, 21), (30, 3)),
        ((0, 22), (12, 7)),
        ((0, 27), (10, 28), (20, 3)),
        ((0, 15), (1, 3)),
    ),
    2: (
        ((0, 5), (0.2, 1), (1, 3)),
        ((0, 2), (3, 7)),
        ((0, 6), (1, 3)),
        ((0, 10), (2, 3)),
        ((0, 5), (24, 4)),
        ((0, 1), (4, 4)),
        ((0, 21), (30, 3)),
        ((0, 12), (5, 18), (20, 3)),
        ((0, 11), (0.5, 13), (1, 14), (2, 15), (3, 16), (4, 17), (5, 3)),
    ),
}


@dataclass(slots=True)
class Movement:
    """A deposit or withdrawal: its stages (from when, its record then, its status), and what it
    moves on the main balance and when."""

    created_us: int
    method: int
    ticker: str
    address: str
    memo: str
    unique_id: str | None
    stages: list[tuple[int, bytes, int]]
    moves: list[tuple[int, str, str, int]]


def movements(
    holdings: Holdings, seed: int, k: int, start_us: int, per_round: float, counter: Iterator[int]
) -> list[Movement]:
    """The deposits and withdrawals made in round ``k`` (from ``start_us``), oldest first."""
    draw = rng(seed, "movements", k)
    count = int(per_round) + (draw.random() < per_round - int(per_round))
    return [_movement(holdings, draw, t, next(counter)) for t in _times(draw, start_us, count)]


def _movement(holdings: Holdings, draw: random.Random, created_us: int, n: int) -> Movement:
    method = 1 if draw.random() < 0.6 else 2
    lifecycles = _LIFECYCLES[method]
    lifecycle = lifecycles[n % len(lifecycles)]
    ticker = draw.choice(("USDT", "USDT", *holdings.movable))
    amount = usdt_amount(ticker, draw.choice((10, 100, 1_000, 10_000, 50_000)), draw)
    places = amount[1]
    if method == 1:
        fee = (amount[0] // 1000, places) if draw.random() < 0.1 else (0, places)
    else:
        fee = usdt_amount(ticker, 1, draw)
    network = draw.choice(NETWORKS[ticker]) if ticker in NETWORKS else None
    address = f"{draw.getrandbits(160):040x}"
    unique_id = str(draw.randrange(10**8, 10**9)) if method == 1 or draw.random() < 0.5 else None
    memo = str(draw.randrange(10**6, 10**7)) if draw.random() < 0.1 else ""
    record = {
        "address": address,
        "uniqueId": unique_id,
        "createdAt": created_us // 1_000_000,
        "currency": CURRENCIES[ticker][0],
        "ticker": ticker,
        "method": method,
        "amount": decimal_text(*amount),
        "description": ""
        if draw.random() < 0.8
        else f"Simulated {spec.TRANSACTION_METHODS[method]}",
        "memo": memo,
        "fee": decimal_text(*fee),
        "status": 0,
        "network": network,
        "transactionHash": f"{draw.getrandbits(256):064x}",
        "transactionId": new_uuid(draw),
        "details": None,
        "confirmations": None,
    }
    stages: list[tuple[int, bytes, int]] = []
    at = created_us
    for step, (hours, status) in enumerate(lifecycle):
        at += int(hours * _HOUR_US) + (draw.randrange(_HOUR_US // 10) if step else 0)
        stages.append(
            (at, _stage(record, method, status, step, len(lifecycle), amount, fee), status)
        )
    moves: list[tuple[int, str, str, int]] = []
    total = atoms(amount) + atoms(fee)
    if method == 1:
        credited = next((t for t, _, s in stages if s in spec.SUCCESSFUL), None)
        if credited is not None:
            moves.append((credited, MAIN, ticker, atoms(amount) - atoms(fee)))
    else:
        moves.append((created_us, MAIN, ticker, -total))
        if stages[-1][2] == 4:
            moves.append((stages[-1][0], MAIN, ticker, total))
    return Movement(created_us, method, ticker, address, memo, unique_id, stages, moves)


def _stage(
    record: Mapping[str, object],
    method: int,
    status: int,
    step: int,
    steps: int,
    amount: Decimal,
    fee: Decimal,
) -> bytes:
    """The record as the history shows it while in ``status``."""
    final = step == steps - 1
    shown = dict(record, status=status)
    if method == 1:
        required = 2 + steps
        shown["confirmations"] = {"actual": required if final else step + 1, "required": required}
    elif status not in (*spec.SUCCESSFUL, 18):
        shown["transactionHash"] = ""  # not sent yet (or never)
    if status == 18:  # a part of it is sent
        shown["details"] = {
            "partial": {
                "requestAmount": decimal_text(*amount),
                "processedAmount": decimal_text(amount[0] // 2, amount[1]),
                "processedFee": decimal_text(fee[0] // 2, fee[1]),
                "normalizeTransaction": "",
            }
        }
    return dumps(shown)


@dataclass(frozen=True, slots=True)
class Conversion:
    time_us: int
    record: bytes
    give: str
    receive: str
    quote_id: str
    moves: tuple[tuple[int, str, str, int], ...]


def conversions(
    holdings: Holdings, seed: int, k: int, start_us: int, per_round: float, counter: Iterator[int]
) -> list[Conversion]:
    """The conversions of round ``k``, oldest first; ids rise with them."""
    draw = rng(seed, "conversions", k)
    count = int(per_round) + (draw.random() < per_round - int(per_round))
    out = []
    for t in _times(draw, start_us, count):
        give, receive = draw.sample(holdings.movable, 2)
        amount = usdt_amount(give, draw.choice((10, 100, 1_000, 5_000)), draw)
        rate = _rate(give, receive, 18 - amount[1])
        got = (amount[0] * rate[0], amount[1] + rate[1])
        n = next(counter)
        if "USDT" in (give, receive):
            path = [{"from": give, "to": receive, "rate": decimal_text(*rate)}]
        else:
            path = [
                {"from": give, "to": "USDT", "rate": decimal_text(*_rate(give, "USDT", 10))},
                {"from": "USDT", "to": receive, "rate": decimal_text(*_rate("USDT", receive, 10))},
            ]
        record = {
            "id": str(n),
            "date": t // 1_000_000,
            "give": decimal_text(*amount),
            "receive": decimal_text(*got),
            "rate": decimal_text(*rate),
            "path": path,
        }
        moves = ((t, MAIN, give, -atoms(amount)), (t, MAIN, receive, atoms(got)))
        out.append(Conversion(t, dumps(record), give, receive, str(n * 7 + 3), moves))
    return out


def _rate(give: str, receive: str, most_places: int) -> Decimal:
    """Receive per give, from their USDT prices: 8 places, more for a tiny rate (at most
    ``most_places``, so that ``give * rate`` stays within 18)."""
    _, (gm, gs), _ = CURRENCIES[give]
    _, (rm, rs), _ = CURRENCIES[receive]
    places = 8
    while True:
        rate = gm * 10 ** (places + rs) // (rm * 10**gs)
        if rate >= 10**5 or places >= most_places:
            return max(rate, 1), places
        places += 1


@dataclass(frozen=True, slots=True)
class Transfer:
    time_us: int
    record: bytes
    sub: str
    direction: str
    moves: tuple[tuple[int, str, str, int], ...]


def transfers(pairing: Pairing, k: int, start_us: int) -> list[Transfer]:
    """The transfers of round ``k`` between a main account and one sub-account (drawn from the
    sub-account's seed, so both ledgers hold the same ones)."""
    draw = rng(pairing.seed, "transfers", k)
    if draw.random() >= 0.35:
        return []
    (t,) = _times(draw, start_us, 1)
    ticker = draw.choice(("USDT", "USDT", "BTC", "ETH"))
    amount = usdt_amount(ticker, draw.choice((50, 500, 5_000)), draw)
    direction = "main_to_sub" if draw.random() < 0.55 else "sub_to_main"
    transaction = time_uuid(t, draw)
    record = {
        "transactionId": transaction,
        "id": transaction,
        "direction": direction,
        "currency": ticker,
        "amount": decimal_text(*amount),
        "createdAt": t // 1_000_000,
    }
    to_sub = direction == "main_to_sub"
    moved = atoms(amount) if to_sub == pairing.sub else -atoms(amount)
    return [Transfer(t, dumps(record), pairing.name, direction, ((t, MAIN, ticker, moved),))]


def subaccount_record(pairing: Pairing, n: int) -> dict[str, Any]:
    """A sub-account as the main account's list shows it."""
    draw = rng(pairing.seed, "subaccount")
    return {
        "id": pairing.id,
        "alias": pairing.name,
        "userId": new_uuid(draw),
        "email": f"{pairing.name[0]}***@s***.sim",
        "status": "active",
        "color": f"#{draw.randrange(1 << 24):06X}",
        "kyc": {"shareKyc": n % 2 == 1, "kycStatus": "shared" if n % 2 else "verified"},
        "permissions": {"spotEnabled": True, "collateralEnabled": n % 3 != 0},
    }
