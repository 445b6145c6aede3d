"""Authentication exactly as the exchange does it (docs/api.md, "Signing a private request"),
over real loopback HTTP."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time

import httpx
import pytest

from pipeline import spec
from pipeline.simulator import Credentials, Simulator
from tests.support.signing import fresh_nonce, post, sign

BALANCE = spec.MAIN_BALANCE.path


@pytest.mark.parametrize("order", ["request-first", "params-first"])
@pytest.mark.parametrize("nonce_as", [str, int])
@pytest.mark.parametrize("window", [None, False, True])
def test_every_published_variant_is_accepted(
    sim: Simulator, order: str, nonce_as: type, window: bool | None
) -> None:
    r = post(
        sim.url,
        spec.TRADING_BALANCE.path,
        {"ticker": "BTC"},
        sim.credentials,
        order=order,
        nonce_as=nonce_as,
        window=window,
    )
    assert r.status_code == 200, r.text
    assert set(r.json()) == {"BTC"}


def test_signature_is_lowercase_hex(sim: Simulator) -> None:
    raw, headers = sign(BALANCE, {}, sim.credentials)
    headers["X-TXC-SIGNATURE"] = headers["X-TXC-SIGNATURE"].upper()
    r = httpx.post(sim.url + BALANCE, content=raw, headers=headers)
    assert (r.status_code, r.json()["code"]) == (401, 10)


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded"])
def test_body_must_be_sent_as_json(sim: Simulator, content_type: str | None) -> None:
    raw, headers = sign(BALANCE, {}, sim.credentials)
    del headers["Content-Type"]
    if content_type:
        headers["Content-Type"] = content_type
    r = httpx.post(sim.url + BALANCE, content=raw, headers=headers)
    assert (r.status_code, r.json()) == (400, {"code": 9, "message": "Invalid payload."})
    headers["Content-Type"] = "application/json; charset=utf-8"
    assert httpx.post(sim.url + BALANCE, content=raw, headers=headers).status_code == 200


def test_wrong_signature_is_unauthorized(sim: Simulator) -> None:
    wrong = Credentials(sim.credentials.api_key, "not-the-secret")
    r = post(sim.url, BALANCE, {}, wrong)
    assert (r.status_code, r.json()) == (401, {"code": 10, "message": "Unauthorized request."})


def test_unknown_key_is_unauthorized(sim: Simulator) -> None:
    r = post(sim.url, BALANCE, {}, Credentials("no-such-key", "x"))
    assert (r.status_code, r.json()["code"]) == (401, 10)


def test_reused_nonce_looks_like_a_rate_limit_but_is_json(sim: Simulator) -> None:
    nonce = fresh_nonce()
    assert post(sim.url, BALANCE, {}, sim.credentials, nonce=nonce).status_code == 200
    again = post(sim.url, BALANCE, {}, sim.credentials, nonce=nonce)
    assert again.status_code == 429
    assert again.json() == {"code": 0, "errors": {}, "message": "Too many requests."}
    lower = post(sim.url, BALANCE, {}, sim.credentials, nonce=nonce - 1)
    assert lower.status_code == 429


def test_nonce_window_refuses_old_and_repeated_nonces(sim: Simulator) -> None:
    now_ms = int(time.time() * 1000)
    old = post(sim.url, BALANCE, {}, sim.credentials, nonce=now_ms - 6_000, window=True)
    assert old.status_code == 400
    assert "more than 5 seconds" in old.json()["message"]
    future = post(sim.url, BALANCE, {}, sim.credentials, nonce=now_ms + 6_000, window=True)
    assert future.status_code == 400
    # Inside the window, order does not matter, but a nonce is good once only.
    first = post(sim.url, BALANCE, {}, sim.credentials, nonce=now_ms + 1_500, window=True)
    earlier = post(sim.url, BALANCE, {}, sim.credentials, nonce=now_ms + 1_000, window=True)
    repeat = post(sim.url, BALANCE, {}, sim.credentials, nonce=now_ms + 1_000, window=True)
    assert (first.status_code, earlier.status_code, repeat.status_code) == (200, 200, 429)


def test_body_must_carry_the_payload_json(sim: Simulator) -> None:
    raw, headers = sign(spec.TRADING_BALANCE.path, {"ticker": "BTC"}, sim.credentials)
    tampered = raw.replace(b'"BTC"', b'"ETH"')
    r = httpx.post(sim.url + spec.TRADING_BALANCE.path, content=tampered, headers=headers)
    assert (r.status_code, r.json()) == (400, {"code": 9, "message": "Invalid payload."})


def test_same_json_in_another_key_order_is_the_same_body(sim: Simulator) -> None:
    raw, headers = sign(spec.TRADING_BALANCE.path, {"ticker": "BTC"}, sim.credentials)
    reordered = json.dumps(dict(reversed(json.loads(raw).items()))).encode()
    r = httpx.post(sim.url + spec.TRADING_BALANCE.path, content=reordered, headers=headers)
    assert r.status_code == 200, r.text


def _raw_post(sim: Simulator, path: str, body: dict[str, object], secret: str) -> httpx.Response:
    raw = json.dumps(body).encode()
    payload = base64.b64encode(raw).decode()
    signature = hmac.new(secret.encode(), payload.encode(), hashlib.sha512).hexdigest()
    headers = {
        "Content-Type": "application/json",
        "X-TXC-APIKEY": sim.credentials.api_key,
        "X-TXC-PAYLOAD": payload,
        "X-TXC-SIGNATURE": signature,
    }
    return httpx.post(sim.url + path, content=raw, headers=headers)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"nonce": "1"}, "Request not provided."),
        ({"request": BALANCE}, "Nonce not provided."),
        ({"request": spec.TRADING_BALANCE.path, "nonce": "1"}, "Invalid payload."),
        ({"request": BALANCE, "nonce": "12ab"}, "Invalid payload."),
        ({"request": BALANCE, "nonce": 1.5}, "Invalid payload."),
        ({"request": BALANCE, "nonce": "9", "nonceWindow": "yes"}, "Invalid payload."),
    ],
)
def test_malformed_signing_fields(sim: Simulator, body: dict[str, object], message: str) -> None:
    r = _raw_post(sim, BALANCE, body, sim.credentials.api_secret)
    assert (r.status_code, r.json()["message"]) == (400, message)


def test_missing_payload_header(sim: Simulator) -> None:
    r = httpx.post(sim.url + BALANCE, json={}, headers={"X-TXC-APIKEY": sim.credentials.api_key})
    assert (r.status_code, r.json()["message"]) == (400, "Payload not provided.")


def test_disabled_key(sim: Simulator) -> None:
    r = post(sim.url, BALANCE, {}, sim.credentials_for("disabled"))
    assert r.status_code == 401
    assert r.json() == {
        "code": 2,
        "message": "This action is unauthorized. Enable your key in API settings",
    }


def test_investments_need_b2b_access(sim: Simulator) -> None:
    r = post(sim.url, spec.INVESTMENTS_HISTORY.path, {}, sim.credentials_for("no_b2b"))
    assert r.status_code == 403
    assert r.json()["message"].startswith("You don't have permission to use this endpoint")
    # The same key reads everything else.
    assert post(sim.url, BALANCE, {}, sim.credentials_for("no_b2b")).status_code == 200


def test_key_reset_needs_the_permission(sim: Simulator) -> None:
    key_id = sim.keys.subaccount_ids[0]
    r = post(
        sim.url,
        spec.RESET_SUBACCOUNT_KEY.path,
        {"apiKeyId": key_id},
        sim.credentials_for("read_only"),
    )
    assert (r.status_code, r.json()["code"]) == (403, 4)


def test_reset_gives_a_sub_account_key_a_new_secret(own_sim: Simulator) -> None:
    ids = own_sim.keys.subaccount_ids
    assert len(ids) >= 2
    for key_id, role in zip(ids, ("sub_1", "sub_2"), strict=True):
        before = own_sim.credentials_for(role)
        assert post(own_sim.url, BALANCE, {}, before).status_code == 200
        r = post(
            own_sim.url, spec.RESET_SUBACCOUNT_KEY.path, {"apiKeyId": key_id}, own_sim.credentials
        )
        assert (r.status_code, r.json()) == (200, {})
        after = own_sim.credentials_for(role)
        assert after.api_key == before.api_key
        assert after.api_secret != before.api_secret
        assert post(own_sim.url, BALANCE, {}, before).status_code == 401
        assert post(own_sim.url, BALANCE, {}, after).status_code == 200
