"""Each fault switch, off by default, scripted or by probability."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from pipeline import spec
from pipeline.simulator import Fault, Simulator, new_field, repeated_key
from tests.support.signing import post

FUNDING = spec.FUNDING_HISTORY.path


def _funding(sim: Simulator) -> httpx.Response:
    return post(sim.url, FUNDING, {"limit": 5}, sim.credentials)


def test_faults_are_off_by_default(sim: Simulator) -> None:
    assert all(_funding(sim).status_code == 200 for _ in range(20))


@pytest.mark.parametrize(
    ("fault", "status"), [(Fault.HTTP_500, 500), (Fault.HTTP_502, 502), (Fault.HTTP_503, 503)]
)
def test_server_errors_come_as_html(own_sim: Simulator, fault: Fault, status: int) -> None:
    own_sim.faults.script([fault])
    r = _funding(own_sim)
    assert r.status_code == status
    assert r.text.startswith("<html>")
    assert _funding(own_sim).status_code == 200  # the script is spent


def test_gateway_rate_limit(own_sim: Simulator) -> None:
    own_sim.faults.script([Fault.GATEWAY_429])
    r = _funding(own_sim)
    assert r.status_code == 429
    assert "retry-after" not in r.headers
    with pytest.raises(json.JSONDecodeError):
        json.loads(r.text)


def test_dropped_connection(own_sim: Simulator) -> None:
    own_sim.faults.script([Fault.DROP_CONNECTION])
    with pytest.raises(httpx.RemoteProtocolError):
        _funding(own_sim)
    assert _funding(own_sim).status_code == 200


def test_slow_answer(own_sim: Simulator) -> None:
    own_sim.faults.set(1.0, [Fault.SLOW], slow_seconds=0.3)
    started = time.monotonic()
    assert _funding(own_sim).status_code == 200
    assert time.monotonic() - started >= 0.3
    with pytest.raises(httpx.ReadTimeout):
        httpx.get(own_sim.url + spec.PING.path, timeout=0.1)


def test_truncated_json(own_sim: Simulator) -> None:
    own_sim.faults.script([Fault.TRUNCATED_JSON])
    r = _funding(own_sim)
    assert r.status_code == 200
    with pytest.raises(json.JSONDecodeError):
        r.json()


@pytest.mark.parametrize("fault", [Fault.EXTRA_FIELD, Fault.MISSING_FIELD, Fault.NUMBER_FOR_STRING])
def test_schema_drift(own_sim: Simulator, fault: Fault) -> None:
    clean = _funding(own_sim).json()["records"][0]
    own_sim.faults.script([fault])
    drifted = _funding(own_sim).json()["records"][0]
    if fault is Fault.EXTRA_FIELD:
        assert set(drifted) - set(clean) == {"unexpectedField"}
    elif fault is Fault.MISSING_FIELD:
        assert len(set(clean) - set(drifted)) == 1
    else:
        assert any(isinstance(v, int | float) for v in drifted.values())


@pytest.mark.parametrize(
    ("op", "params"),
    [
        (spec.MAIN_BALANCE, {}),
        (spec.HEDGE_MODE, {}),
        (spec.WATCHER_LINKS, {"account": "demo-miner"}),
        (spec.INVESTMENTS_HISTORY, {"limit": 2}),
        (spec.EXECUTED_HISTORY, {"limit": 2}),  # grouped by market
        (spec.EXECUTED_HISTORY, {"limit": 2, "market": "BTC_USDT"}),  # a plain array
        (spec.MAIN_ACCOUNT_HISTORY, {"limit": 2}),  # a page with a total
        (spec.SUBACCOUNT_LIST, {}),  # a page under data
        (spec.POSITIONS_HISTORY, {"limit": 2}),  # records with an object inside
        (spec.COLLATERAL_BALANCE, {}),  # numbers keyed by ticker
    ],
)
def test_drift_reaches_every_kind_of_answer(
    own_sim: Simulator, op: spec.Operation, params: dict[str, object]
) -> None:
    clean = post(own_sim.url, op.path, params, own_sim.credentials).content
    for fault in (Fault.EXTRA_FIELD, Fault.MISSING_FIELD, Fault.NUMBER_FOR_STRING):
        own_sim.faults.script([fault])
        drifted = post(own_sim.url, op.path, params, own_sim.credentials)
        assert drifted.status_code == 200, fault
        assert drifted.content != clean, fault


def test_probability_is_seeded_and_repeatable(own_sim: Simulator) -> None:
    def run() -> list[int]:
        own_sim.faults.set(0.5, [Fault.HTTP_503], seed=3)
        return [_funding(own_sim).status_code for _ in range(30)]

    first, second = run(), run()
    assert first == second
    assert 5 < first.count(503) < 25
    own_sim.faults.clear()
    assert {_funding(own_sim).status_code for _ in range(10)} == {200}


def test_faults_can_target_paths(own_sim: Simulator) -> None:
    own_sim.faults.set(1.0, [Fault.HTTP_500], paths=[spec.PING.path])
    assert httpx.get(own_sim.url + spec.PING.path).status_code == 500
    assert _funding(own_sim).status_code == 200


def test_control_routes_steer_a_simulator_in_another_process(own_sim: Simulator) -> None:
    control = own_sim.url + "/_simulator"
    httpx.post(control + "/faults", json={"script": ["http_502", None]}).raise_for_status()
    assert _funding(own_sim).status_code == 502
    assert _funding(own_sim).status_code == 200
    now = httpx.post(control + "/clock", json={"advance": 60}).json()["now"]
    assert now == own_sim.clock.now()
    httpx.post(control + "/limits", json={"budgets": {"funding-history": [1, 60]}})
    assert [_funding(own_sim).status_code for _ in range(2)] == [200, 429]
    stats = httpx.get(control + "/stats").json()
    assert stats["rate_limited"] == 1
    assert stats["faults"] == {"http_502": 1}


def test_drift_of_an_empty_answer(own_sim: Simulator) -> None:
    key_id = own_sim.keys.subaccount_ids[0]
    path = spec.RESET_SUBACCOUNT_KEY.path
    for fault, body in ((Fault.MISSING_FIELD, b""), (Fault.NUMBER_FOR_STRING, b"0")):
        own_sim.faults.script([fault])
        r = post(own_sim.url, path, {"apiKeyId": key_id}, own_sim.credentials)
        assert (r.status_code, r.content) == (200, body)


def test_tamper_rewrites_successful_answers_only(own_sim: Simulator) -> None:
    seen: list[dict[str, object]] = []

    def hostile(params: dict[str, object], body: bytes) -> bytes:
        seen.append(params)
        return b'{"offset":0,"limit":5,"records":[{"market":"../x"}]}'

    own_sim.faults.tamper(FUNDING, hostile)
    r = _funding(own_sim)
    assert r.json()["records"] == [{"market": "../x"}]
    assert seen == [{"market": None, "limit": 5, "offset": 0}]
    # Refusals are the exchange's own: a bad request is never tampered with.
    refused = post(own_sim.url, FUNDING, {"limit": 0}, own_sim.credentials)
    assert refused.status_code == 422
    own_sim.faults.tamper(FUNDING, None)
    assert _funding(own_sim).json()["records"][0]["market"].endswith("_PERP")


# --- Drift by name, a page cap: what an exchange does without notice ---------------------------

MAIN = spec.MAIN_BALANCE.path


def test_a_new_field_in_every_record_of_a_page(own_sim: Simulator) -> None:
    own_sim.faults.tamper(FUNDING, new_field("leverage", "10", "records"))
    page = _funding(own_sim).json()
    assert [r.pop("leverage") for r in page["records"]] == ["10"] * 5
    assert page["records"] == own_sim.dataset.funding.newest_first()[:5]


def test_a_new_field_in_an_envelope_and_in_each_value(own_sim: Simulator) -> None:
    own_sim.faults.tamper(FUNDING, new_field("total", 9, "top"))
    own_sim.faults.tamper(MAIN, new_field("locked", "0", "values"))
    assert _funding(own_sim).json()["total"] == 9
    balances = post(own_sim.url, MAIN, {}, own_sim.credentials).json()
    assert balances == {t: {**b, "locked": "0"} for t, b in own_sim.dataset.main_balance.items()}
    with pytest.raises(ValueError, match="records, values or top"):
        new_field("x", 1, "everywhere")  # type: ignore[arg-type]


@pytest.mark.parametrize("again", [None, {"main_balance": "7"}])
def test_a_ticker_listed_twice_is_served_as_bytes(own_sim: Simulator, again: object) -> None:
    own_sim.faults.tamper(MAIN, repeated_key(again))
    text = post(own_sim.url, MAIN, {}, own_sim.credentials).text
    first, balance = next(iter(own_sim.dataset.main_balance.items()))
    assert text.count(f'"{first}":') == 2
    assert text.endswith(f'"{first}":{json.dumps(again or balance, separators=(",", ":"))}}}')
    assert json.loads(text)[first] == (again or balance)  # a parser keeps the last, silently


def test_pages_capped_say_so_in_their_limit(own_sim: Simulator) -> None:
    own_sim.page_cap = 3
    page = _funding(own_sim).json()
    assert (page["limit"], len(page["records"])) == (3, 3)
    investments = post(
        own_sim.url, spec.INVESTMENTS_HISTORY.path, {"limit": 2}, own_sim.credentials
    ).json()
    assert (investments["limit"], len(investments["records"])) == (2, 2)  # under the cap: asked
    own_sim.page_cap = None
    assert _funding(own_sim).json()["limit"] == 5
    with pytest.raises(ValueError, match="at least 1"):
        own_sim.page_cap = 0


@pytest.mark.parametrize(
    ("op", "params"),
    [
        (spec.EXECUTED_HISTORY, {"limit": 3}),
        (spec.CLOSED_PNL, {"limit": 3}),
        (spec.CONVERT_HISTORY, {"from": 1_788_000_000, "to": 1_790_000_000}),
        (spec.SUBACCOUNT_LIST, {}),
    ],
)
def test_a_new_field_reaches_the_records_of_every_envelope(
    own_sim: Simulator, op: spec.Operation, params: dict[str, object]
) -> None:
    own_sim.faults.tamper(op.path, new_field("brandNew", 1, "records"))
    body = post(own_sim.url, op.path, params, own_sim.credentials).json()
    found = body if isinstance(body, list) else body.get("records", body.get("data"))
    if found is None:  # grouped by market
        found = [r for group in body.values() for r in group]
    assert found
    assert all(record["brandNew"] == 1 for record in found)


def test_faults_apply_to_the_new_endpoints(own_sim: Simulator) -> None:
    for op, params in ((spec.ORDER_HISTORY, {}), (spec.COLLATERAL_BALANCE_SUMMARY, {})):
        own_sim.faults.script([Fault.HTTP_503, Fault.GATEWAY_429, Fault.TRUNCATED_JSON])
        statuses = [post(own_sim.url, op.path, params, own_sim.credentials) for _ in range(4)]
        assert [r.status_code for r in statuses] == [503, 429, 200, 200]
        with pytest.raises(json.JSONDecodeError):
            statuses[2].json()
