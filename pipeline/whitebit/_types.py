"""Typed views of the raw records, exactly as the exchange sends them (spec section 2).

Decimals stay strings and timestamps stay what the spec says they are: the warehouse normalizes.
The runtime shapes come from `spec`; a test keeps these static types equal to them.
"""

from __future__ import annotations

from typing import TypedDict


class FixedPlan(TypedDict):
    id: str
    ticker: str
    status: int
    percent: str
    duration: int
    interestTicker: str
    interestRatio: str
    minInvestment: str
    maxInvestment: str
    maxPossibleInvestment: str


class Investment(TypedDict):
    id: str
    plan: FixedPlan
    status: int
    created: int
    updated: int
    paymentTime: int
    amount: str
    interestPaid: str


class InvestmentsPage(TypedDict):
    offset: int
    limit: int
    records: list[Investment]


class FundingEntry(TypedDict):
    market: str
    fundingTime: str
    fundingRate: str
    fundingAmount: str
    positionAmount: str
    settlementPrice: str
    rateCalculatedTime: str


class FundingPage(TypedDict):
    offset: int
    limit: int
    records: list[FundingEntry]


class MainBalance(TypedDict):
    main_balance: str


class TradingBalance(TypedDict):
    available: str
    freeze: str


class WatcherLink(TypedDict):
    id: str
    accounts: list[str]
    name: str
    link: str
    permissions: list[str]
    liveUntil: int | None
    createdAt: int


class HedgeMode(TypedDict):
    hedgeMode: bool
