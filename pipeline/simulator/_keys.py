"""API keys of the simulated accounts, their permissions, secrets and nonce state.

Every key belongs to an account: the main account's keys (``partner``, ``no_b2b``, ``read_only``,
``disabled``), and one key per sub-account (``sub_1`` .. ``sub_N``), each its own account.
Keys and secrets are derived from the seed (and the region, outside the global one), so a
simulator started with the same seed always accepts the same demo credentials, and a key of one
region is unknown to a simulator of the other.
"""

from __future__ import annotations

import hashlib
import threading
import uuid
from dataclasses import dataclass, field

from pipeline.spec import NONCE_WINDOW_MS, WALL_CLOCK


@dataclass(frozen=True, slots=True)
class Credentials:
    """A public key and its secret, as a client is given them."""

    api_key: str
    api_secret: str = field(repr=False)


@dataclass(slots=True)
class ApiKey:
    role: str
    key_id: str
    api_key: str
    secret: bytes = field(repr=False)
    #: The account the key acts for: `MAIN`, or the sub-account's own name (its role).
    account: str = "main"
    enabled: bool = True
    b2b: bool = False
    can_reset_keys: bool = True
    subaccount: bool = False
    last_nonce: int = 0
    window_nonces: set[int] = field(default_factory=set)
    next_prune_ms: int = 0
    resets: int = 0

    @property
    def credentials(self) -> Credentials:
        return Credentials(self.api_key, self.secret.decode())


class NonceRejected(Exception):
    """The nonce is not acceptable: reused or not increasing, or outside the 5 s window."""

    def __init__(self, *, outside_window: bool) -> None:
        super().__init__("nonce rejected")
        self.outside_window = outside_window


#: The account the main roles' keys act for.
MAIN = "main"
#: The regions, each a service of its own with its own keys and data (docs/api.md).
REGIONS = ("global", "eu")

#: role -> (enabled, B2B access, may reset sub-account keys, is a sub-account key)
MAIN_ROLES: dict[str, tuple[bool, bool, bool, bool]] = {
    "partner": (True, True, True, False),  # the demo key: B2B partner, every permission
    "no_b2b": (True, False, True, False),  # investments history answers 403
    "read_only": (True, True, False, False),  # key reset answers 403 code 4
    "disabled": (False, True, True, False),  # every request answers 401 code 2
}
#: A sub-account's key: enabled, without B2B access, resetting nothing.
SUBACCOUNT_FLAGS = (True, False, False, True)
#: Sub-accounts a simulator has unless told otherwise.
DEFAULT_SUBACCOUNTS = 2


def subaccount_role(n: int) -> str:
    """The role (and account name) of the ``n``-th sub-account, counted from 1."""
    return f"sub_{n}"


def roles(subaccounts: int = DEFAULT_SUBACCOUNTS) -> dict[str, tuple[bool, bool, bool, bool]]:
    """Every role of a key store with that many sub-accounts, main roles first."""
    if subaccounts < 0:
        raise ValueError(f"a number of sub-accounts is at least 0, not {subaccounts}")
    subs = {subaccount_role(n): SUBACCOUNT_FLAGS for n in range(1, subaccounts + 1)}
    return {**MAIN_ROLES, **subs}


#: The roles of a simulator with the default sub-accounts (tests derive a seed's secrets from them).
ROLES = roles()


def check_region(region: str) -> str:
    """The region, if it is one: a misspelt one would serve keys and data of neither."""
    if region not in REGIONS:
        raise ValueError(f"a region is one of {', '.join(REGIONS)}, not {region!r}")
    return region


def _derive(seed: int, role: str, what: str, n: int = 0, region: str = "global") -> str:
    # The global region keeps the derivation it always had: its keys stay the demo keys.
    scope = f"{seed}" if region == "global" else f"{region}:{seed}"
    return hashlib.sha256(f"whitebit-sim:{scope}:{role}:{what}:{n}".encode()).hexdigest()


class KeyStore:
    """Looks keys up by public key and id, checks nonces, and resets sub-account secrets."""

    def __init__(
        self, seed: int, *, subaccounts: int = DEFAULT_SUBACCOUNTS, region: str = "global"
    ) -> None:
        self._lock = threading.Lock()
        self._seed = seed
        self.region = check_region(region)
        self._by_key: dict[str, ApiKey] = {}
        self._by_id: dict[str, ApiKey] = {}
        for role, (enabled, b2b, can_reset, sub) in roles(subaccounts).items():
            key = ApiKey(
                role=role,
                key_id=str(uuid.UUID(_derive(seed, role, "id", region=region)[:32], version=4)),
                api_key=_derive(seed, role, "key", region=region)[:32],
                secret=_derive(seed, role, "secret", region=region)[:40].encode(),
                account=role if sub else MAIN,
                enabled=enabled,
                b2b=b2b,
                can_reset_keys=can_reset,
                subaccount=sub,
            )
            self._by_key[key.api_key] = key
            self._by_id[key.key_id] = key

    def __getitem__(self, role: str) -> ApiKey:
        for key in self._by_key.values():
            if key.role == role:
                return key
        raise KeyError(role)

    @property
    def roles(self) -> list[str]:
        """Every key's role, main roles first, then ``sub_1`` .. ``sub_N``."""
        return [key.role for key in self._by_key.values()]

    @property
    def accounts(self) -> list[str]:
        """Every account a key acts for: `MAIN` first, then the sub-accounts."""
        return list(dict.fromkeys(key.account for key in self._by_key.values()))

    def by_api_key(self, api_key: str) -> ApiKey | None:
        return self._by_key.get(api_key)

    def subaccount(self, key_id: str) -> ApiKey | None:
        key = self._by_id.get(key_id.lower())
        return key if key is not None and key.subaccount else None

    @property
    def subaccount_ids(self) -> list[str]:
        return [k.key_id for k in self._by_id.values() if k.subaccount]

    def reset(self, key: ApiKey) -> None:
        """Give the key a new secret; it keeps its id and public key."""
        with self._lock:
            key.resets += 1
            secret = _derive(self._seed, key.role, "secret", key.resets, self.region)
            key.secret = secret[:40].encode()

    def accept_nonce(self, key: ApiKey, nonce: int, *, window: bool) -> None:
        """Record the nonce or raise `NonceRejected`, as the exchange does (docs/api.md,
        "Nonce rules")."""
        with self._lock:
            if window:
                # This machine's real time, as the exchange checks a nonce by its own: never
                # the data clock, which a test sets.
                now_ms = int(WALL_CLOCK.now() * 1000)
                if abs(nonce - now_ms) > NONCE_WINDOW_MS:
                    raise NonceRejected(outside_window=True)
                if nonce in key.window_nonces:
                    raise NonceRejected(outside_window=False)
                key.window_nonces.add(nonce)
                if now_ms >= key.next_prune_ms:  # forget, once a second, what the window refuses
                    horizon = now_ms - NONCE_WINDOW_MS
                    key.window_nonces = {n for n in key.window_nonces if n >= horizon}
                    key.next_prune_ms = now_ms + 1_000
                return
            # Without the window: greater than the last one accepted (window nonces do not count).
            if nonce <= key.last_nonce:
                raise NonceRejected(outside_window=False)
            key.last_nonce = nonce
