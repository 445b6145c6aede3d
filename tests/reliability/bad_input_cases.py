"""The bad answers of the bad-input suite (`test_bad_input`), one `Case` each: what the
simulator serves, which asset reads it, and the outcome it must end in (`Fails`, `Rejects`,
`Keeps`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from typing import Any

import dagster as dg
import orjson

from pipeline import spec
from pipeline.simulator import Dataset, Scale, SimClock, new_field, repeated_key
from pipeline.whitebit import RetryPolicy
from tests.support.cli_runs import Rows
from tests.support.dagster_runs import asset
from tests.support.simulated import FROZEN_AT

Tamper = Callable[[dict[str, Any], bytes], bytes]

#: The assets of the account ``default`` that read each answer (the investments and their plans
#: are one multi-asset).
funding_history, investments = asset("funding_history"), asset("investments")
main_balances, trading_balances = asset("main_balances"), asset("trading_balances")
hedge_mode, watcher_links_asset = asset("hedge_mode"), asset("watcher_links")

HELD = [date(2026, 9, 11), date(2026, 9, 12)]  # funding days the warehouse holds already
NEW = date(2026, 9, 13)  # the day a nightly run adds
FUNDING, INVESTMENTS = spec.FUNDING_HISTORY.path, spec.INVESTMENTS_HISTORY.path
MAIN, TRADING = spec.MAIN_BALANCE.path, spec.TRADING_BALANCE.path
HEDGE, LINKS = spec.HEDGE_MODE.path, spec.WATCHER_LINKS.path
#: A funding payment of the new day (ETH_PERP, 2026-09-13 08:00 UTC), and one of a held day.
NEW_PAYMENT, HELD_PAYMENT = ("ETH_PERP", "1789286400"), ("ETH_PERP", "1789200000")
#: The hedged market pays a long and a short at each funding time.
HEDGED_SHORT = ("BTC_PERP", "1789286400")
#: The first ticker each balance answer lists, the one `repeated_key` lists twice.
_DATA = Dataset(7, Scale.small(), SimClock(FROZEN_AT))
FIRST_MAIN = next(iter(_DATA.main_balance))
FIRST_TRADING = next(
    t for t, b in _DATA.trading_balance.items() if b != {"available": "0", "freeze": "0"}
)
#: How often the client asks for an answer that breaks the contract, and for one not JSON.
TWICE = "(after 2 attempts)"
WHOLE_BUDGET = f"(after {RetryPolicy().max_retries + 1} attempts)"
HTML = b"<!DOCTYPE html><html><head><title>Maintenance</title></head><body>Back soon</body></html>"

# --- How answers are spoiled ----------------------------------------------------------------


def _json(edit: Callable[[dict[str, Any], Any], Any]) -> Tamper:
    """Rewrite the parsed answer: ``edit(params, doc)`` changes it in place or returns another."""

    def tamper(params: dict[str, Any], body: bytes) -> bytes:
        doc = orjson.loads(body)
        changed = edit(params, doc)
        return orjson.dumps(doc if changed is None else changed)

    return tamper


def _payment(target: tuple[str, str], edit: Callable[[dict[str, Any]], None]) -> Tamper:
    """Change one funding payment wherever a page lists it (short sides left alone)."""

    def each(params: dict[str, Any], page: dict[str, Any]) -> None:
        for record in page["records"]:
            if (record["market"], record["fundingTime"]) == target and not record[
                "positionAmount"
            ].startswith("-"):
                edit(record)

    return _json(each)


def _set(field: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda record: record.__setitem__(field, value)


def _each_page(edit: Callable[[dict[str, Any]], None]) -> Tamper:
    """Change every funding page's envelope."""
    return _json(lambda params, page: edit(page))


def _replace_payment(target: tuple[str, str], by: Any) -> Tamper:
    """List ``by`` wherever a page lists this funding payment (its long side)."""

    def each(params: dict[str, Any], page: dict[str, Any]) -> None:
        page["records"] = [
            by
            if (r["market"], r["fundingTime"]) == target and not r["positionAmount"].startswith("-")
            else r
            for r in page["records"]
        ]

    return _json(each)


def _every_plan(name: str, value: Any) -> Tamper:
    def each(params: dict[str, Any], page: dict[str, Any]) -> None:
        for record in page["records"]:
            record["plan"][name] = value

    return _json(each)


def _first_investment(edit: Callable[[list[dict[str, Any]]], None]) -> Tamper:
    """Change the first page of active investments (status 1, offset 0)."""

    def each(params: dict[str, Any], page: dict[str, Any]) -> None:
        if params["status"] == 1 and params["offset"] == 0 and params["ticker"] is None:
            edit(page["records"])

    return _json(each)


def _first_link(edit: Callable[[dict[str, Any]], None]) -> Tamper:
    """Change the first watcher link of the first mining account."""

    def each(params: dict[str, Any], doc: dict[str, Any]) -> None:
        if params["account"] == "demo-miner":
            edit(doc["data"][0])

    return _json(each)


def _page_at(offset: int, edit: Callable[[dict[str, Any]], Any]) -> Tamper:
    return _json(lambda params, page: edit(page) if params["offset"] == offset else None)


def _every_offset_the_first_page() -> Tamper:
    first: list[Any] = []

    def each(params: dict[str, Any], page: dict[str, Any]) -> None:
        if params["offset"] == 0:
            first[:] = page["records"]
        elif first:
            page["records"] = first

    return _json(each)


def _short_turned_long(params: dict[str, Any], page: dict[str, Any]) -> None:
    """The hedged market's short payment listed as a long: two longs, different amounts."""
    for record in page["records"]:
        if (record["market"], record["fundingTime"]) == HEDGED_SHORT:
            record["positionAmount"] = record["positionAmount"].removeprefix("-")


def _body(content: bytes) -> Tamper:
    return lambda params, body: content


# --- What must come of it --------------------------------------------------------------------


@dataclass(frozen=True)
class Fails:
    """The step fails saying all of these, and nothing in the warehouse changes."""

    says: tuple[str, ...]


@dataclass(frozen=True)
class Rejects:
    """``records`` records of ``table`` in ``_rejects``, each reason saying ``says``; the table
    loses ``lost`` rows it would have had (the rejected ones); all else is written."""

    table: str
    records: int
    says: str
    lost: int


@dataclass(frozen=True)
class Keeps:
    """The run succeeds; ``check(rows, baseline)`` says the data is as it should be."""

    check: Callable[[Rows, Rows], None]


Outcome = Fails | Rejects | Keeps


def same(rows: Rows, baseline: Rows) -> None:
    assert rows == baseline


def _accounts_are_data(rows: Rows, baseline: Rows) -> None:
    hostile = [row for row in rows["watcher_links"] if ESCAPE in row[2]]
    assert len(hostile) == 1  # stored verbatim, as a list item
    assert [r for r in rows["watcher_links"] if r not in hostile] == [
        r for r in baseline["watcher_links"] if r[1] != hostile[0][1]
    ]
    assert {t: r for t, r in rows.items() if t != "watcher_links"} == {
        t: r for t, r in baseline.items() if t != "watcher_links"
    }


ESCAPE = "../../../../etc/passwd"


@dataclass(frozen=True)
class Case:
    name: str
    path: str
    tamper: Tamper
    asset: dg.AssetsDefinition
    outcome: Outcome
    #: Funding days the run materializes (a snapshot asset runs today's partition).
    days: tuple[date, ...] = (*HELD, NEW)
    #: The exchange's page size, when it answers fewer records than asked.
    page_cap: int | None = None


def untouched(params: dict[str, Any], body: bytes) -> bytes:
    return body


def _funding_fails(name: str, tamper: Tamper, *says: str) -> Case:
    return Case(name, FUNDING, tamper, funding_history, Fails(says))


def _funding_rejects(name: str, edit: Callable[[dict[str, Any]], None], says: str) -> Case:
    return Case(
        name, FUNDING, _payment(NEW_PAYMENT, edit), funding_history,
        Rejects("funding_history", 1, says, lost=1),
    )  # fmt: skip


def _funding_keeps(name: str, tamper: Tamper, page_cap: int | None = None) -> Case:
    return Case(name, FUNDING, tamper, funding_history, Keeps(same), page_cap=page_cap)


CASES = [
    # A field missing, null or of another JSON type: the record is rejected, the page loads.
    _funding_rejects(
        "funding-number-for-decimal",
        _set("fundingAmount", 0.5),
        "fundingAmount: number where a decimal string belongs",
    ),
    _funding_rejects(
        "funding-bool-for-decimal",
        _set("fundingRate", True),
        "fundingRate: boolean where a decimal string belongs",
    ),
    _funding_rejects(
        "funding-integer-for-time-string",
        _set("fundingTime", 1789286400),
        "fundingTime: integer where a string of Unix seconds belongs",
    ),
    _funding_rejects(
        "funding-missing-field",
        lambda record: record.pop("settlementPrice"),
        "settlementPrice: missing",
    ),
    _funding_rejects("funding-null-field", _set("fundingRate", None), "fundingRate: null"),
    _funding_rejects("funding-null-market", _set("market", None), "market: null"),
    Case(
        "funding-record-not-an-object",
        FUNDING,
        _replace_payment(NEW_PAYMENT, "ETH_PERP 1789286400"),
        funding_history,
        Rejects("funding_history", 1, "record: expected a JSON object", lost=1),
    ),
    # What an exchange adds without notice: tolerated, the rows exactly as without it.
    _funding_keeps("funding-extra-field", _payment(NEW_PAYMENT, _set("leverage", "10"))),
    _funding_keeps(
        "funding-new-field-in-every-record", new_field("leverage", {"max": "10"}, "records")
    ),
    _funding_keeps("funding-new-field-in-the-envelope", new_field("total", 5400, "top")),
    _funding_keeps("funding-pages-capped-at-50", untouched, page_cap=50),
    # The envelope breaks the contract: asked once more at once, then the walk fails.
    _funding_fails(
        "funding-records-null",
        _each_page(lambda page: page.__setitem__("records", None)),
        "at records: expected an array, got null",
        TWICE,
    ),
    _funding_fails(
        "funding-records-an-object",
        _each_page(lambda page: page.__setitem__("records", {})),
        "at records: expected an array, got an object",
        TWICE,
    ),
    _funding_fails(
        "funding-limit-above-the-asked",
        _each_page(lambda page: page.__setitem__("limit", 200)),
        "asked for limit 100, the answer says 200",
        TWICE,
    ),
    # Pages that are not what was asked for.
    _funding_fails(
        "funding-empty-page-mid-walk",
        _page_at(99, lambda page: page.__setitem__("records", [])),
        "at offset 99",
        "does not line up with the page before it",
    ),
    _funding_fails(
        "funding-huge-page",
        _page_at(0, lambda page: page["records"].extend(page["records"][:50])),
        "asked for at most 100 records, the answer has 150",
        TWICE,
    ),
    _funding_fails(
        "funding-offset-echo-wrong",
        _json(lambda params, page: page.__setitem__("offset", page["offset"] + 1)),
        "asked for offset 0, the answer is for 1",
        TWICE,
    ),
    _funding_fails(
        "funding-same-page-for-every-offset",
        _every_offset_the_first_page(),
        "100 pages in a row",
        "the same records whatever the offset",
    ),
    # JSON cut short (another try may get it whole: the whole budget), or a whole answer that is
    # not JSON at all or that the parser refuses before its end (the same page on the next try:
    # one quick retry).
    _funding_fails("funding-html-with-200", _body(HTML), "not JSON at all", "Maintenance", TWICE),
    _funding_fails(
        "funding-invalid-utf8",
        lambda params, body: body.replace(b'_PERP"', b'_PERP\xff\xfe"', 1),
        "the JSON parser refuses: not valid UTF-8",
        "byte 54 of",
        TWICE,
    ),
    _funding_fails(
        "funding-truncated-json",
        lambda params, body: body[: len(body) // 2],
        "not valid JSON",
        WHOLE_BUDGET,
    ),
    _funding_fails("funding-empty-body", _body(b""), "not valid JSON", WHOLE_BUDGET),
    _funding_fails(
        "funding-bare-nan",
        lambda params, body: re.sub(rb'"fundingRate":"[^"]*"', b'"fundingRate":NaN', body, count=1),
        "the JSON parser refuses: unexpected character",
        "byte 97 of",
        TWICE,
    ),
    _funding_fails(
        "funding-top-level-array",
        _json(lambda params, page: page["records"]),
        "(the whole answer)",
        "expected an object, got an array",
        TWICE,
    ),
    _funding_fails(
        "funding-code-in-success-body",
        _json(lambda params, page: page.__setitem__("code", 0)),
        "HTTP 200 code 0",
    ),
    _funding_fails(
        "funding-success-false",
        _body(b'{"success":false,"message":"Service is under maintenance","params":[]}'),
        "HTTP 200",
        "Service is under maintenance",
    ),
    # Values the warehouse refuses: the record goes to _rejects, with its reason.
    _funding_rejects(
        "funding-negative-time",
        _set("fundingTime", "-1789286400"),
        "fundingTime: not a Unix timestamp",
    ),
    _funding_rejects("funding-time-zero", _set("fundingTime", "0"), "fundingTime: before 2009"),
    _funding_rejects(
        "funding-time-year-5138",
        _set("fundingTime", "99999999999"),
        "fundingTime: more than a day after extracted_at",
    ),
    _funding_rejects(
        "funding-time-with-letters",
        _set("fundingTime", "17892864OO"),
        "fundingTime: not a Unix timestamp (ASCII digits only)",
    ),
    _funding_rejects(
        "funding-decimal-with-exponent",
        _set("fundingRate", "1e-5"),
        "fundingRate: not a decimal number",
    ),
    _funding_rejects(
        "funding-decimal-40-digits",
        _set("fundingAmount", "1234567890123456789012345678901234567890"),
        "fundingAmount: more than 20 integer digits",
    ),
    _funding_rejects(
        "funding-decimal-19-places",
        _set("settlementPrice", "0.1234567890123456789"),
        "settlementPrice: more than 18 decimal places",
    ),
    _funding_rejects(
        "funding-decimal-nan-string", _set("fundingRate", "NaN"), "fundingRate: not a decimal"
    ),
    _funding_rejects(
        "funding-decimal-empty-string", _set("fundingAmount", ""), "fundingAmount: not a decimal"
    ),
    _funding_rejects(
        "funding-market-escaping-the-path",
        _set("market", "../x"),
        "market: not of the form <BASE>_PERP",
    ),
    Case(
        "funding-duplicate-key-different-amounts",
        FUNDING,
        _json(_short_turned_long),
        funding_history,
        Rejects("funding_history", 2, "duplicate key (market=BTC_PERP", lost=2),
    ),
    Case(
        "funding-time-in-milliseconds",
        FUNDING,
        _payment(NEW_PAYMENT, _set("fundingTime", "1789286400000")),
        funding_history,
        Keeps(same),  # read as milliseconds by magnitude (warehouse.normalize): the same instant
    ),
    Case(
        "funding-held-day-record-turns-bad",
        FUNDING,
        _payment(HELD_PAYMENT, _set("fundingRate", "1e-5")),
        funding_history,
        Fails(("2026-09-12", "were rejected (first: fundingRate: not a decimal number)")),
        days=tuple(HELD),
    ),
    # Investments.
    Case(
        "investment-string-for-int-status",
        INVESTMENTS,
        _first_investment(lambda records: records[0].__setitem__("status", "1")),
        investments,
        Rejects("investments", 1, "status: string where an integer belongs", lost=1),
    ),
    Case(
        "investment-plan-null",
        INVESTMENTS,
        _first_investment(lambda records: records[0].__setitem__("plan", None)),
        investments,
        Rejects("investments", 1, "plan: missing or not a JSON object", lost=1),
    ),
    Case(
        "investment-new-field-in-every-record",
        INVESTMENTS,
        new_field("autoRenew", False, "records"),
        investments,
        Keeps(same),
    ),
    Case(
        "investment-new-field-in-every-plan",
        INVESTMENTS,
        _every_plan("riskLevel", "low"),
        investments,
        Keeps(same),
    ),
    Case(
        "investment-pages-capped-at-50",
        INVESTMENTS,
        untouched,
        investments,
        Keeps(same),
        page_cap=50,
    ),
    Case(
        "investment-status-7",
        INVESTMENTS,
        _first_investment(lambda records: records[0].__setitem__("status", 7)),
        investments,
        Rejects("investments", 1, "status: not a known status", lost=1),
    ),
    Case(
        "investment-negative-time",
        INVESTMENTS,
        _first_investment(lambda records: records[0].__setitem__("created", -1)),
        investments,
        Rejects("investments", 1, "created: negative Unix timestamp", lost=1),
    ),
    Case(
        "investment-time-year-5138",
        INVESTMENTS,
        _first_investment(lambda records: records[0].__setitem__("paymentTime", 99999999999)),
        investments,
        Rejects("investments", 1, "paymentTime: after 2100-01-01", lost=1),
    ),
    Case(
        "investment-duplicate-id-different-amounts",
        INVESTMENTS,
        _first_investment(lambda records: records[1].__setitem__("id", records[0]["id"])),
        investments,
        Rejects("investments", 2, "duplicate key (investment_id=", lost=2),
    ),
    Case(
        "investment-huge-page",
        INVESTMENTS,
        _first_investment(lambda records: records.extend(records[:1])),
        investments,
        Fails(("asked for at most 100 records, the answer has 101", TWICE)),
    ),
    # Balances and hedge mode.
    Case(
        "balance-ticker-escaping-the-path",
        MAIN,
        _json(lambda params, doc: doc.__setitem__("../../etc", {"main_balance": "1"})),
        main_balances,
        Rejects("main_balances", 1, "ticker: not a ticker", lost=0),
    ),
    Case(
        "balance-number-for-decimal",
        MAIN,
        _json(lambda params, doc: doc.__setitem__("USDT", {"main_balance": 1.5})),
        main_balances,
        Rejects("main_balances", 1, "main_balance: number where a decimal string belongs", lost=1),
    ),
    Case(
        "balance-array-for-object",
        MAIN,
        _body(b"[]"),
        main_balances,
        Fails(("(the whole answer)", "expected an object, got an array", TWICE)),
    ),
    Case(
        "balance-new-field-in-each",
        MAIN,
        new_field("locked", "0", "values"),
        main_balances,
        Keeps(same),
    ),
    Case(
        "balance-ticker-listed-twice",
        MAIN,
        repeated_key({"main_balance": "1000000"}),
        main_balances,
        Fails((f"at {FIRST_MAIN}: a ticker listed more than once", TWICE)),
    ),
    Case(
        "trading-absolute-path-ticker",
        TRADING,
        _json(
            lambda params, doc: doc.__setitem__("/etc/passwd", {"available": "1", "freeze": "0"})
        ),
        trading_balances,
        Rejects("trading_balances", 1, "ticker: not a ticker", lost=0),
    ),
    Case(
        "trading-bool-for-decimal",
        TRADING,
        _json(lambda params, doc: doc[next(iter(doc))].__setitem__("freeze", False)),
        trading_balances,
        Rejects("trading_balances", 1, "freeze: boolean where a decimal string belongs", lost=1),
    ),
    Case(
        "trading-ticker-listed-twice",
        TRADING,
        repeated_key(None),
        trading_balances,
        Fails((f"at {FIRST_TRADING}: a ticker listed more than once", TWICE)),
    ),
    Case(
        "hedge-mode-string-for-bool",
        HEDGE,
        _body(b'{"hedgeMode":"true"}'),
        hedge_mode,
        Rejects("hedge_mode", 1, "hedgeMode: string where a boolean belongs", lost=1),
    ),
    Case(
        "hedge-mode-empty-object",
        HEDGE,
        _body(b"{}"),
        hedge_mode,
        Rejects("hedge_mode", 1, "hedgeMode: missing", lost=1),
    ),
    Case(
        "hedge-mode-new-field",
        HEDGE,
        new_field("positionMode", "oneway", "top"),
        hedge_mode,
        Keeps(same),
    ),
    Case(
        "hedge-mode-not-an-object",
        HEDGE,
        _body(b"true"),
        hedge_mode,
        Fails(("(the whole answer)", "expected an object, got a boolean", TWICE)),
    ),
    # Watcher links.
    Case(
        "link-accounts-escaping-the-path",
        LINKS,
        _first_link(lambda link: link.__setitem__("accounts", [ESCAPE])),
        watcher_links_asset,
        Keeps(_accounts_are_data),
    ),
    Case(
        "link-live-until-missing",
        LINKS,
        _first_link(lambda link: link.pop("liveUntil")),
        watcher_links_asset,
        Rejects("watcher_links", 1, "liveUntil: missing (null is allowed, absence is not)", lost=1),
    ),
    Case(
        "link-live-until-a-date-string",
        LINKS,
        _first_link(lambda link: link.__setitem__("liveUntil", "2027-01-01")),
        watcher_links_asset,
        Rejects(
            "watcher_links",
            1,
            "liveUntil: string where an integer Unix timestamp belongs",
            lost=1,
        ),
    ),
    Case(
        "link-new-field-in-every-link",
        LINKS,
        new_field("scope", ["read"], "records"),
        watcher_links_asset,
        Keeps(same),
    ),
    Case(
        "link-created-at-zero",
        LINKS,
        _first_link(lambda link: link.__setitem__("createdAt", 0)),
        watcher_links_asset,
        Rejects("watcher_links", 1, "createdAt: before 2009-01-01", lost=1),
    ),
]
