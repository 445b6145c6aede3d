"""Normalization: exact decimals, both timestamp units, every reject reason, keys and counts."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from decimal import Decimal

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline import spec
from tests.support.records import (
    DAY,
    DAY_START,
    EXTRACTED_AT,
    funding_record,
    investment,
    movement,
    order,
    plan,
    trade,
    watcher_link,
)
from warehouse import normalize, schemas, writer
from warehouse.normalize import Batch, _intake


def funding(records: object, day: date = DAY) -> Batch:
    return normalize.normalize(spec.FUNDING, records, extracted_at=EXTRACTED_AT, day=day)


def snapshot(history: spec.History, answer: object) -> Batch:
    """A snapshot's answer, taken on `DAY`."""
    return normalize.normalize(history, answer, extracted_at=EXTRACTED_AT, day=DAY)


def main_balances(balances: object) -> Batch:
    return snapshot(spec.MAIN_BALANCES, balances)


def investments(records: object) -> Batch:
    return snapshot(spec.INVESTMENTS, records)


def fixed_plans(records: object) -> Batch:
    """The plans of the same investments history (each investment names its plan)."""
    return snapshot(spec.FIXED_PLANS, records)


def assert_counts_add_up(batch: Batch) -> None:
    assert batch.received == batch.normalized + batch.rejected + batch.duplicates


def only_reason(batch: Batch) -> str:
    assert batch.normalized == 0, batch.rows.to_pylist()
    (reason,) = batch.rejects["reason"].to_pylist()
    return str(reason)


# --- Decimals ----------------------------------------------------------------------------------

decimal_strings = st.builds(
    lambda sign, whole, fraction: f"{sign}{whole}{'.' + fraction if fraction else ''}",
    st.sampled_from(["", "-"]),
    st.integers(min_value=0, max_value=10**20 - 1).map(str),
    st.text(alphabet="0123456789", max_size=18),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(decimal_strings, min_size=1, max_size=40))
def test_any_decimal_of_38_digits_and_18_places_round_trips_exactly(values: list[str]) -> None:
    balances = {f"T{i}": {"main_balance": v} for i, v in enumerate(values)}
    batch = main_balances(balances)
    assert batch.rejected == 0
    assert batch.rows.schema.field("main_balance").type == pa.decimal128(38, 18)
    rows = batch.rows.to_pylist()
    by_ticker = {row["ticker"]: row["main_balance"] for row in rows}
    assert all(by_ticker[f"T{i}"] == Decimal(v) for i, v in enumerate(values))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", Decimal(0)),
        ("-0", Decimal(0)),
        ("-0.000000000000000001", Decimal("-1E-18")),
        (
            "99999999999999999999.999999999999999999",
            Decimal("99999999999999999999.999999999999999999"),
        ),
        (
            "-99999999999999999999.999999999999999999",
            Decimal("-99999999999999999999.999999999999999999"),
        ),
        ("0.000123456789", Decimal("0.000123456789")),
        ("000000000000000000000000012.5", Decimal("12.5")),
        ("1.500000000000000000000000", Decimal("1.5")),
    ],
)
def test_edge_decimals_are_exact(text: str, expected: Decimal) -> None:
    batch = main_balances({"BTC": {"main_balance": text}})
    assert batch.rejected == 0
    assert batch.rows["main_balance"].to_pylist() == [expected]


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("1e5", "main_balance: not a decimal number"),
        ("NaN", "main_balance: not a decimal number"),
        ("Infinity", "main_balance: not a decimal number"),
        ("", "main_balance: not a decimal number"),
        (" 1", "main_balance: not a decimal number"),
        ("+1", "main_balance: not a decimal number"),
        (".5", "main_balance: not a decimal number"),
        ("5.", "main_balance: not a decimal number"),
        ("1,000", "main_balance: not a decimal number"),
        ("١٢", "main_balance: not a decimal number"),
        (
            "0.0000000000000000001",
            "main_balance: more than 18 decimal places (would round)",
        ),
        (
            "100000000000000000000",
            "main_balance: more than 20 integer digits (would overflow DECIMAL(38,18))",
        ),
        (1.5, "main_balance: number where a decimal string belongs"),
        # A number of an answer parsed exactly (one with fractional timestamps) is a number too.
        (Decimal("1.5"), "main_balance: number where a decimal string belongs"),
        (15, "main_balance: integer where a decimal string belongs"),
        (True, "main_balance: boolean where a decimal string belongs"),
        (None, "main_balance: null"),
    ],
)
def test_bad_decimals_are_rejected_with_their_reason(value: object, reason: str) -> None:
    batch = main_balances({"BTC": {"main_balance": value}, "ETH": {"main_balance": "2"}})
    assert batch.rows["ticker"].to_pylist() == ["ETH"]
    assert batch.rejects["reason"].to_pylist() == [reason]
    assert batch.rejects["raw_json"].to_pylist()[0].startswith('{"BTC":')
    assert_counts_add_up(batch)


def test_main_balances_keep_explicit_zero_rows() -> None:
    batch = main_balances({"BTC": {"main_balance": "0"}, "ETH": {"main_balance": "0.0"}})
    assert sorted(batch.rows["ticker"].to_pylist()) == ["BTC", "ETH"]


# --- Timestamps --------------------------------------------------------------------------------


def test_funding_time_in_seconds_and_milliseconds_give_the_same_instant() -> None:
    seconds = funding_record(fundingTime=str(DAY_START + 60))
    millis = funding_record(fundingTime=str((DAY_START + 60) * 1000 + 250), positionAmount="-1")
    batch = funding([seconds, millis])
    times = sorted(batch.rows["funding_time"].to_pylist())
    assert times == [
        datetime(2024, 3, 1, 0, 1, tzinfo=UTC),
        datetime(2024, 3, 1, 0, 1, 0, 250_000, tzinfo=UTC),
    ]
    assert batch.rows.schema.field("funding_time").type == pa.timestamp("us", tz="UTC")


def test_integer_timestamps_in_both_units() -> None:
    in_ms = investment(id="inv-2", created=(DAY_START - 86400) * 1000)
    batch = investments([investment(), in_ms])
    assert batch.rows["created"].to_pylist() == [datetime(2024, 2, 29, tzinfo=UTC)] * 2


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("17e8", "fundingTime: not a Unix timestamp (ASCII digits only)"),
        ("-1709251200", "fundingTime: not a Unix timestamp (ASCII digits only)"),
        ("1709251200.5", "fundingTime: not a Unix timestamp (ASCII digits only)"),
        ("", "fundingTime: not a Unix timestamp (ASCII digits only)"),
        ("1234567890123456789", "fundingTime: more than 18 digits, not a Unix timestamp"),
        ("1200000000", "fundingTime: before 2009-01-01"),
        ("1200000000000", "fundingTime: before 2009-01-01"),
        ("99999999999", "fundingTime: more than a day after extracted_at"),
        (str((DAY_START + 3 * 86400) * 1000), "fundingTime: more than a day after extracted_at"),
        (1709251200, "fundingTime: integer where a string of Unix seconds belongs"),
        (None, "fundingTime: null"),
    ],
)
def test_bad_string_timestamps_are_rejected_into_the_named_partition(
    value: object, reason: str
) -> None:
    batch = funding([funding_record(fundingTime=value)], day=date(2024, 2, 1))
    assert only_reason(batch) == reason
    assert batch.rejects["partition"].to_pylist() == ["2024-02-01"]


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (-5, "created: negative Unix timestamp"),
        (1709251200.0, "created: number where an integer Unix timestamp belongs"),
        ("1709251200", "created: string where an integer Unix timestamp belongs"),
        (True, "created: boolean where an integer Unix timestamp belongs"),
        (2**70, "created: integer outside the 64-bit range"),
    ],
)
def test_bad_integer_timestamps_are_rejected(value: object, reason: str) -> None:
    assert only_reason(investments([investment(created=value)])) == reason


def test_payment_time_and_link_expiry_may_lie_in_the_future_within_reason() -> None:
    far = int(datetime(2030, 1, 1, tzinfo=UTC).timestamp())
    inv = investments([investment(paymentTime=far)])
    assert inv.normalized == 1
    absurd = investments(
        [investment(paymentTime=int(datetime(2101, 1, 1, tzinfo=UTC).timestamp()))]
    )
    assert only_reason(absurd) == "paymentTime: after 2100-01-01"


# --- Funding ------------------------------------------------------------------------------------


def test_funding_rows_are_typed_and_dated_by_their_own_time() -> None:
    late = funding_record(fundingTime=str(DAY_START + 86400 + 5))
    batch = funding([funding_record(), late])
    assert batch.rows.schema == schemas.TABLES["funding_history"].arrow_schema
    assert sorted(batch.rows["funding_date"].to_pylist()) == [DAY, date(2024, 3, 2)]
    assert batch.rows["funding_amount"].to_pylist()[0] == Decimal("-0.123456789012345678")
    assert batch.covers == (DAY,)


def test_hedge_mode_long_and_short_at_the_same_instant_are_two_rows() -> None:
    batch = funding([funding_record(positionAmount="2"), funding_record(positionAmount="-2")])
    assert sorted(batch.rows["position_side"].to_pylist()) == ["long", "short"]
    assert batch.rejected == 0


def test_zero_position_counts_as_long() -> None:
    assert funding([funding_record(positionAmount="0")]).rows["position_side"].to_pylist() == [
        "long"
    ]


def test_identical_duplicate_is_counted_and_kept_once() -> None:
    batch = funding([funding_record(), funding_record(), funding_record(market="ETH_PERP")])
    assert (batch.normalized, batch.rejected, batch.duplicates) == (2, 0, 1)
    assert_counts_add_up(batch)


def test_conflicting_duplicates_are_all_rejected_with_the_key() -> None:
    batch = funding(
        [funding_record(), funding_record(fundingAmount="5"), funding_record(market="ETH_PERP")]
    )
    assert batch.rows["market"].to_pylist() == ["ETH_PERP"]
    assert batch.rejects["record_index"].to_pylist() == [0, 1]
    reason = batch.rejects["reason"].to_pylist()[0]
    assert reason.startswith("duplicate key (market=BTC_PERP, funding_time=2024-03-01 08:00:00")
    assert "2 records in this batch differ" in reason
    assert batch.rejects["partition"].to_pylist() == ["2024-03-01"] * 2


def test_a_field_named_two_ways_is_read_under_either_and_rejected_when_they_differ() -> None:
    """WhiteBIT's OpenAPI names ``transaction_id`` and ``unique_id`` where the answers clients
    recorded name ``transactionId`` and ``uniqueId`` (`spec.Field.alias`)."""

    def respelled(n: int, **both: object) -> dict[str, object]:
        record = movement(transactionId=f"00000000-0000-4000-8000-00000000000{n}", uniqueId="7")
        record["transaction_id"], record["unique_id"] = record.pop("transactionId"), "7"
        del record["uniqueId"]
        return {**record, **both}

    camel = movement(uniqueId="7")
    batch = normalize.normalize(
        spec.DEPOSITS_WITHDRAWALS,
        [camel, respelled(2), respelled(3, uniqueId="7"), respelled(4, transactionId="other")],
        extracted_at=EXTRACTED_AT,
        day=DAY,
    )
    assert batch.rows["transaction_id"].to_pylist() == [
        "00000000-0000-4000-8000-000000000001",
        "00000000-0000-4000-8000-000000000002",
        "00000000-0000-4000-8000-000000000003",
    ]
    assert batch.rows["unique_id"].to_pylist() == ["7"] * 3
    assert batch.rejects["record_index"].to_pylist() == [3]
    assert batch.rejects["reason"].to_pylist() == [
        'transactionId "other" and transaction_id "00000000-0000-4000-8000-000000000004": one '
        "field spelled two ways, with different values"
    ]
    assert batch.rejects["partition"].to_pylist() == [DAY.isoformat()]
    assert_counts_add_up(batch)


def test_every_bad_field_is_named_in_one_reject() -> None:
    bad = funding_record(market="btc", fundingRate="x", settlementPrice=None)
    reason = only_reason(funding([bad]))
    assert reason == (
        "market: not of the form <BASE>_PERP; fundingRate: not a decimal number; "
        "settlementPrice: null"
    )


def test_non_objects_and_non_arrays_are_rejects_not_crashes() -> None:
    batch = funding([funding_record(), "junk", 7])
    assert batch.normalized == 1
    assert batch.rejects["raw_json"].to_pylist() == ['"junk"', "7"]
    whole = funding({"records": []})
    assert only_reason(whole) == "expected a JSON array of funding history"


def test_a_clean_batch_of_many_records_has_no_rejects() -> None:
    records = [
        funding_record(market=f"M{i % 50}_PERP", fundingTime=str(DAY_START + i // 50))
        for i in range(20_000)
    ]
    batch = funding(records)
    assert (batch.normalized, batch.rejected, batch.duplicates) == (20_000, 0, 0)


def test_naive_extracted_at_is_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        normalize.normalize(spec.FUNDING, [], extracted_at=datetime(2024, 1, 1), day=DAY)


# --- Investments and plans ---------------------------------------------------------------------


def test_investments_flatten_the_plan_and_yield_distinct_plans() -> None:
    other = plan(id="plan-2", status=4, ticker="BTC", interestTicker="USDT")
    records = [investment(), investment(id="inv-2"), investment(id="inv-3", plan=other)]
    inv, plans = investments(records), fixed_plans(records)
    assert inv.rows.schema == schemas.TABLES["investments"].arrow_schema
    first = inv.rows.to_pylist()[0]
    assert first["status_label"] == "active"
    assert first["plan_percent"] == Decimal("5.25")
    assert first["plan_duration_minutes"] == 43200
    assert first["interest_paid"] == Decimal("0.000123456789")
    assert sorted(plans.rows["plan_id"].to_pylist()) == ["plan-1", "plan-2"]
    assert plans.rows.schema == schemas.TABLES["fixed_plans"].arrow_schema
    labels = {row["plan_id"]: row["status_label"] for row in plans.rows.to_pylist()}
    assert labels == {"plan-1": "active", "plan-2": "pause"}
    assert (plans.received, plans.duplicates) == (3, 1)
    assert_counts_add_up(plans)


def test_one_plan_id_with_two_contents_is_rejected_from_fixed_plans() -> None:
    changed = plan(maxPossibleInvestment="1")
    records = [investment(), investment(id="inv-2", plan=changed)]
    assert investments(records).normalized == 2
    plans = fixed_plans(records)
    assert plans.normalized == 0
    assert plans.rejected == 2
    assert all("duplicate key (plan_id=plan-1)" in r for r in plans.rejects["reason"].to_pylist())


def test_unknown_status_and_missing_plan_are_rejected() -> None:
    records = [
        investment(status=3),
        investment(id="inv-2", plan=None),
        investment(id="inv-3", plan=plan(status=9)),
    ]
    reasons = investments(records).rejects["reason"].to_pylist()
    assert reasons == [
        "status: not a known status (1 (active), 2 (closed))",
        "plan: missing or not a JSON object",
        "plan.status: not a known status (1 (active), 2 (no coins left), 3 (inactive), 4 (pause))",
    ]
    assert fixed_plans(records).rejects["reason"].to_pylist() == [
        "plan of record 2: status: not a known status "
        "(1 (active), 2 (no coins left), 3 (inactive), 4 (pause))"
    ]


@pytest.mark.parametrize(
    ("record", "reason"),
    [
        ({k: v for k, v in investment().items() if k != "created"}, "created: missing"),
        (investment(created=None), "created: null"),
        (investment(status="1"), "status: string where an integer belongs"),
        (investment(amount=12.5), "amount: number where a decimal string belongs"),
        (investment(id=7), "id: integer where a string belongs"),
        (investment(plan=plan(duration="43200")), "plan.duration: string where an integer belongs"),
        (["inv-2"], "record: expected a JSON object"),
    ],
    ids=["missing", "null", "string for integer", "number for string", "integer for string",
         "nested string for integer", "not an object"],
)  # fmt: skip
def test_each_record_level_problem_has_its_own_reason(record: object, reason: str) -> None:
    batch = investments([investment(), record])
    assert batch.normalized == 1
    assert batch.rejects["reason"].to_pylist() == [reason]
    assert [json.loads(t) for t in batch.rejects["raw_json"].to_pylist()] == [record]


# --- Balances, hedge mode, watcher links -------------------------------------------------------


def test_trading_balances_one_row_per_ticker() -> None:
    batch = snapshot(
        spec.TRADING_BALANCES,
        {
            "USDT": {"available": "10.5", "freeze": "0.25"},
            "../x": {"available": "1", "freeze": "0"},
        },
    )
    assert batch.rows.select(["ticker", "available", "frozen"]).to_pylist() == [
        {"ticker": "USDT", "available": Decimal("10.5"), "frozen": Decimal("0.25")}
    ]
    assert batch.rejects["reason"].to_pylist()[0].startswith("ticker: not a ticker")


def test_balance_response_that_is_not_an_object_is_one_reject() -> None:
    assert only_reason(main_balances(["BTC"])) == "expected a JSON object keyed by ticker"


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ({"hedgeMode": True}, None),
        ({"hedgeMode": True, "newField": 1}, None),
        ({"hedgeMode": "true"}, "hedgeMode: string where a boolean belongs"),
        ({"hedgeMode": None}, "hedgeMode: null"),
        ({}, "hedgeMode: missing"),
        ([], "hedge mode: expected a JSON object"),
    ],
)
def test_hedge_mode(value: object, reason: str | None) -> None:
    batch = snapshot(spec.HEDGE, value)
    assert (batch.normalized, batch.rejected) == ((1, 0) if reason is None else (0, 1))
    if reason is None:
        assert batch.rows["hedge_mode"].to_pylist() == [True]
    else:
        assert batch.rejects["reason"].to_pylist() == [reason]


def test_watcher_links_lists_nullable_expiry_and_account() -> None:
    expiring = watcher_link(id="link-2", liveUntil=DAY_START + 7 * 86400, permissions=[])
    batch = snapshot(spec.LINKS, {"pool-a": [watcher_link(), expiring], "pool-b": [watcher_link()]})
    assert batch.rows.schema == schemas.TABLES["watcher_links"].arrow_schema
    rows = batch.rows.to_pylist()
    assert [(r["mining_account"], r["link_id"]) for r in rows] == [
        ("pool-a", "link-1"),
        ("pool-a", "link-2"),
        ("pool-b", "link-1"),
    ]
    assert rows[0]["accounts"] == ["miner1", "miner2"]
    assert rows[0]["live_until"] is None
    assert rows[1]["live_until"] == datetime(2024, 3, 8, tzinfo=UTC)
    assert rows[1]["permissions"] == []


def test_watcher_link_problems_name_the_account() -> None:
    absent_expiry = watcher_link()
    del absent_expiry["liveUntil"]
    batch = snapshot(
        spec.LINKS,
        {"pool-a": [watcher_link(accounts=["a", 1]), absent_expiry], "pool-b": {"code": 0}},
    )
    assert batch.rejects["reason"].to_pylist() == [
        "account 'pool-a': accounts: array holding a non-string item",
        "account 'pool-a': liveUntil: missing (null is allowed, absence is not)",
        "account 'pool-b': expected a JSON array of watcher links",
    ]
    assert_counts_add_up(batch)


def test_an_unreadable_time_is_rejected_into_the_day_of_the_record_before_it() -> None:
    """Newest first: a record whose time cannot be read sits among its own day's records."""
    day_2, day_1 = DAY_START + 86_400 + 3600, DAY_START + 3600
    records = [
        funding_record(fundingTime="garbage", market="AAA_PERP"),  # first: the caller's day
        funding_record(fundingTime=str(day_2), market="BTC_PERP"),
        funding_record(fundingTime="0", market="CCC_PERP"),  # 1970: no exchange existed
        funding_record(fundingTime=str(day_1), market="DDD_PERP"),
        funding_record(fundingTime="-1", market="EEE_PERP"),
    ]
    batch = funding(records, day=date(2024, 1, 9))
    assert batch.normalized == 2
    by_market = {
        r["raw_json"].split('"market":"')[1][:3]: r["partition"] for r in batch.rejects.to_pylist()
    }
    assert by_market == {"AAA": "2024-01-09", "CCC": "2024-03-02", "EEE": "2024-03-01"}


def test_text_that_is_not_valid_unicode_is_a_reject_not_a_crash() -> None:
    batch = funding([funding_record(), funding_record(market="BTC\ud800_PERP")])
    assert batch.normalized == 1
    (reason,) = batch.rejects["reason"].to_pylist()
    assert reason == "market: text that is not valid Unicode (a lone surrogate)"
    assert_counts_add_up(batch)


def test_reading_fields_in_one_pass_or_one_by_one_gives_the_same_rows() -> None:
    good = [funding_record(market=f"M{i}_PERP") for i in range(20)]
    fast = funding(good)  # every value a string: one pass
    slow = funding([*good, funding_record(market="X_PERP", fundingRate=0.5)])  # one by one
    assert fast.rows.equals(slow.rows.slice(0, 20))
    assert slow.rejects["reason"].to_pylist() == [
        "fundingRate: number where a decimal string belongs"
    ]


def _all_strings_but_bad() -> list[dict[str, object]]:
    """Every funding field a string, many of them wrong: both ways of reading must reject them
    alike."""
    return [
        funding_record(),
        funding_record(),  # an exact copy
        funding_record(market="ETH_PERP", fundingAmount="1e5"),
        funding_record(market="SOL_PERP", fundingRate="1" * 40),
        funding_record(market="ADA_PERP", positionAmount="0.0000000000000000001"),
        funding_record(market="XRP_PERP", fundingTime="garbage"),
        funding_record(market="../../etc", settlementPrice="-0"),
        funding_record(market="DOT_PERP", rateCalculatedTime="99999999999999999999"),
        funding_record(market="LTC_PERP"),
        funding_record(market="LTC_PERP", fundingAmount="2"),  # same key, other content
        funding_record(market="ÉTH_PERP", fundingAmount="-0.000000000000000001"),
    ]


def test_bad_strings_are_rejected_alike_read_in_one_pass_or_field_by_field() -> None:
    records = _all_strings_but_bad()
    one_pass = funding(records)
    # A JSON number anywhere sends the whole batch field by field.
    number = funding_record(market="NUM_PERP", fundingRate=0.5)
    by_field = funding([*records, number])
    assert (one_pass.normalized, one_pass.rejected, one_pass.duplicates) == (1, 9, 1)
    assert by_field.rows.equals(one_pass.rows)
    assert by_field.rejects.slice(0, one_pass.rejected).equals(one_pass.rejects)
    assert by_field.rejects["reason"].to_pylist()[-1] == (
        "fundingRate: number where a decimal string belongs"
    )
    assert_counts_add_up(one_pass)
    assert_counts_add_up(by_field)


@pytest.mark.parametrize(
    ("odd", "reason"),
    [
        (funding_record(market="ETH_PERP", extra="field"), None),
        (
            {k: v for k, v in funding_record(market="ETH_PERP").items() if k != "fundingRate"},
            "fundingRate: missing",
        ),
        (
            funding_record(market="ETH_PERP", fundingRate=0.0001),
            "fundingRate: number where a decimal string belongs",
        ),
        (funding_record(market="ETH_PERP", fundingRate=None), "fundingRate: null"),
        (
            funding_record(market="ETH\ud800_PERP"),
            "market: text that is not valid Unicode (a lone surrogate)",
        ),
        ("not an object", "record: expected a JSON object"),
    ],
    ids=["extra field", "missing field", "number", "null", "lone surrogate", "not an object"],
)
def test_a_record_off_the_contract_is_rejected_as_sent_beside_good_ones(
    odd: object, reason: str | None
) -> None:
    batch = funding([funding_record(), odd])
    assert_counts_add_up(batch)
    if reason is None:  # a field the contract does not list changes nothing
        assert batch.rows["market"].to_pylist() == ["BTC_PERP", "ETH_PERP"]
        assert batch.rejected == 0
        return
    assert batch.rows["market"].to_pylist() == ["BTC_PERP"]
    assert batch.rejects["reason"].to_pylist() == [reason]
    assert batch.rejects["record_index"].to_pylist() == [1]
    # The record as sent, every value as it was (JSON text that reads back to it).
    assert [json.loads(text) for text in batch.rejects["raw_json"].to_pylist()] == [odd]


# --- Read at once, or record by record ----------------------------------------------------------

#: Fills with awkward values, each read at C speed (strings in one pass, times as texts at once).
_AWKWARD_FILLS = {
    "BTC_USDT": [
        trade(id=1, amount="12345678901234567890.123456789012345678", fee="0.000000000000000001"),
        trade(id=2, price="007.500000000000000000000", deal="-0", clientOrderId="ордер-🙂"),
        trade(id=3, time=DAY_START + 60, feeAsset="USDT", side="sell", role=1),
        trade(id=3, time=DAY_START + 60, feeAsset="USDT", side="sell", role=1),  # a copy
    ],
    "ETH_USDT": [trade(id=4, time=Decimal("1709251260.5"))],
    "SOL_USDT": [
        trade(id=5, time=Decimal("1709251260.1234567")),  # a seventh place would round
        trade(id=6, time=Decimal("1.7E+9")),  # not written as seconds
        trade(id=7, time=-5),
        trade(id=8, amount="1" * 21),
    ],
}
#: What the record-by-record intake reads alone: a JSON number where a decimal string belongs,
#: a string where a number of seconds does, an integer field holding a number with a fraction.
_ODD_FILL = trade(id=9, amount=Decimal("0.5"), time="1709251260", orderId=Decimal("5.5"))


def _fills(answer: dict[str, list[dict[str, object]]]) -> Batch:
    return normalize.normalize(spec.TRADES, answer, extracted_at=EXTRACTED_AT, day=DAY)


def test_fills_read_at_once_or_record_by_record_give_the_same_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with monkeypatch.context() as patch:  # every value checked one by one in Python: none
        patch.setattr(_intake, "_wrong_value", lambda *_: pytest.fail("read record by record"))
        at_once = _fills(_AWKWARD_FILLS)
    by_record = _fills({**_AWKWARD_FILLS, "XRP_USDT": [_ODD_FILL]})
    assert at_once.rows.equals(by_record.rows)
    assert at_once.rows.schema == schemas.TABLES["trades"].arrow_schema
    assert (at_once.normalized, at_once.rejected, at_once.duplicates) == (4, 4, 1)
    assert at_once.rows.to_pylist()[0]["amount"] == Decimal(
        "12345678901234567890.123456789012345678"
    )
    assert [r["trade_time"] for r in at_once.rows.to_pylist()] == [
        datetime(2024, 3, 1, 8, 0, 0, 123456, tzinfo=UTC),
        datetime(2024, 3, 1, 8, 0, 0, 123456, tzinfo=UTC),
        datetime(2024, 3, 1, 0, 1, tzinfo=UTC),
        datetime(2024, 3, 1, 0, 1, 0, 500000, tzinfo=UTC),
    ]
    assert by_record.rejects.slice(0, at_once.rejected).equals(at_once.rejects)
    assert at_once.rejects["reason"].to_pylist() == [
        "market 'SOL_USDT': time: finer than a microsecond (1709251260.1234567): would round",
        "market 'SOL_USDT': time: not a Unix time in seconds (1.7E+9)",
        "market 'SOL_USDT': time: not a Unix time in seconds (-5)",
        "market 'SOL_USDT': amount: more than 20 integer digits (would overflow DECIMAL(38,18))",
    ]
    # The odd record: one line naming each field it breaks, and the record as sent.
    odd = by_record.rejects.slice(at_once.rejected).to_pylist()
    assert [r["reason"] for r in odd] == [
        "market 'XRP_USDT': orderId: number where an integer belongs; time: string where a "
        "number of Unix seconds belongs; amount: number where a decimal string belongs"
    ]
    assert json.loads(odd[0]["raw_json"]) == json.loads(json.dumps(_ODD_FILL, default=str)) | {
        "amount": 0.5,
        "orderId": 5.5,
    }
    assert_counts_add_up(at_once)
    assert_counts_add_up(by_record)


def test_null_and_absent_fields_read_at_once_or_field_by_field_give_the_same_table() -> None:
    # Nullable strings (a deposit's uniqueId, network) null or set; an order's optional
    # activation fields absent or set; text beyond ASCII.
    movements = [
        movement(),
        movement(transactionId="00000000-0000-4000-8000-000000000002", uniqueId="ü-1"),
        movement(transactionId="00000000-0000-4000-8000-000000000003", network=None),
    ]
    odd_movement = movement(transactionId="00000000-0000-4000-8000-000000000004", memo=7)
    at_once = snapshot(spec.DEPOSITS_WITHDRAWALS, movements)
    by_field = snapshot(spec.DEPOSITS_WITHDRAWALS, [*movements, odd_movement])
    assert at_once.rows.equals(by_field.rows)
    assert at_once.rows["unique_id"].to_pylist() == [None, "ü-1", None]
    assert at_once.rows["network"].to_pylist() == ["TRC20", "TRC20", None]
    assert by_field.rejects["reason"].to_pylist() == ["memo: integer where a string belongs"]
    orders = {
        "BTC_USDT": [order(), order(id=502, activationPrice="61000.5", activationCondition="<=")]
    }
    odd_order = {"ETH_USDT": [order(id=503, activationCondition=1)]}
    read = normalize.normalize(spec.ORDERS, orders, extracted_at=EXTRACTED_AT, day=DAY)
    by_field = normalize.normalize(
        spec.ORDERS, orders | odd_order, extracted_at=EXTRACTED_AT, day=DAY
    )
    assert read.rows.equals(by_field.rows)
    assert read.rows["activation_price"].to_pylist() == [None, Decimal("61000.5")]
    assert by_field.rejects["reason"].to_pylist() == [
        "market 'ETH_USDT': activationCondition: integer where a string belongs"
    ]


def test_fills_cross_the_pipe_exactly_and_an_id_missing_or_past_64_bits_is_refused() -> None:
    # The writer's pipe gives back the very values (types included: a Decimal of its digits,
    # an int past 64 bits whole); a field read at once, or value by value where a record lacks
    # it, gives the same rows, and each reject names its market.
    no_id = trade(id=1003)
    del no_id["id"]
    answer = {
        "BTC_USDT": [trade(id=1001, time=Decimal("1709280000.100000"))],
        "ETH_USDT": [trade(id=1002, time=Decimal("1709280000.000000"), amount="1E+5"), no_id],
        "SOL_USDT": [trade(id=2**70, clientOrderId='ü\n"x"')],
    }
    sent = writer.decode(writer.encode(["take", answer]), exact=True)[1]
    assert sent == answer
    assert [list(map(type, r.values())) for rs in sent.values() for r in rs] == [
        list(map(type, r.values())) for rs in answer.values() for r in rs
    ]
    batch, whole = _fills(sent), _fills({"BTC_USDT": answer["BTC_USDT"]})
    assert batch.rows.slice(0, 1).equals(whole.rows)
    assert batch.rejects["reason"].to_pylist() == [
        "market 'ETH_USDT': amount: not a decimal number",
        "market 'ETH_USDT': id: missing",
        "market 'SOL_USDT': id: integer outside the 64-bit range",
    ]
    assert_counts_add_up(batch)
