"""The accounts a deployment extracts: `accounts.yaml`, or the single-account variables.

The file (its path in `WHITEBIT_ACCOUNTS_FILE`) lists each account: a short name (the ``account``
of every row and a segment of every path), its base URL (``global``, ``eu`` or a URL), the *names*
of the variables that hold its key and secret (never the values), its mining-pool accounts and
markets, and whether its key may read the investments history (B2B partner keys only). An
account may instead name a key of the embedded simulator (``simulator: sub_1``): the demo's and
the tests' accounts. See ``accounts.example.yaml``.

A file that is wrong is refused as a whole when it is loaded, before any request, with the line
and the reason: an unknown field, a duplicate name, a name that is not a safe path segment, a
variable that is not set.

Without the file, the single-account variables (`WHITEBIT_API_KEY`, `WHITEBIT_API_SECRET`,
`WHITEBIT_BASE_URL`, `WHITEBIT_MINING_ACCOUNTS`, `WHITEBIT_MARKETS`) make one account named
``default``, whose assets keep the keys they had before accounts (``funding_history``, no
prefix), so the history a Dagster instance holds of them stays theirs. With no credentials
either, that account is the embedded simulator's.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

import pydantic
import yaml

from pipeline import spec
from warehouse.schemas import ACCOUNT_NAME, DEFAULT_ACCOUNT

ACCOUNTS_FILE_ENV: Final = "WHITEBIT_ACCOUNTS_FILE"
#: The single-account variables' names (their values are credentials; the names are not).
KEY_ENV: Final = "WHITEBIT_API_KEY"
SECRET_ENV: Final = "WHITEBIT_API_SECRET"  # noqa: S105
BASE_URLS: Final = {"global": spec.GLOBAL_BASE_URL, "eu": spec.EU_BASE_URL}
#: Sub-accounts of the embedded simulator an accounts file may name.
SIMULATOR_SUBACCOUNTS: Final = 4
#: The embedded simulator's keys an account may name: the main account's B2B partner key, the
#: main account's key without B2B access, or a sub-account's.
SIMULATOR_KEYS: Final = (
    "partner",
    "no_b2b",
    *(f"sub_{n}" for n in range(1, SIMULATOR_SUBACCOUNTS + 1)),
)


class AccountsFileError(ValueError):
    """The accounts file cannot be used: where (file, line) and why."""


@dataclass(frozen=True, slots=True)
class Account:
    """One account to extract."""

    name: str
    base_url: str
    #: Names of the variables holding the key and the secret; None on the embedded simulator.
    key_env: str | None
    secret_env: str | None
    mining_accounts: tuple[str, ...]
    #: Markets walked one by one; None: all in one walk.
    markets: tuple[str, ...] | None
    #: The key may read the investments history (B2B partner keys only).
    investments: bool
    #: The embedded simulator's key this account uses, when it has no credentials.
    simulator_key: str | None = None
    #: Asset keys are prefixed with the name: every account of a file. The account made of the
    #: single-account variables keeps the unprefixed keys it had before accounts.
    prefixed: bool = True

    @property
    def simulated(self) -> bool:
        return self.key_env is None

    @property
    def key_prefix(self) -> list[str]:
        return [self.name] if self.prefixed else []

    @property
    def resource_key(self) -> str:
        """The Dagster resource of its exchange."""
        return f"whitebit_{self.name}" if self.prefixed else "whitebit"

    @property
    def pool(self) -> str:
        """The Dagster pool its API steps hold: one step per account at a time."""
        return f"whitebit_api_{self.name}" if self.prefixed else "whitebit_api"

    @property
    def group(self) -> str:
        return self.name if self.prefixed else "whitebit"


class _Entry(pydantic.BaseModel):
    """One account as the file states it."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    name: str = pydantic.Field(pattern=ACCOUNT_NAME.pattern)
    base_url: str = pydantic.Field(default="global", validate_default=True)
    api_key_env: str | None = None
    api_secret_env: str | None = None
    simulator: Literal[SIMULATOR_KEYS] | None = None  # type: ignore[valid-type]
    mining_accounts: list[str] = []
    markets: list[str] | None = None
    investments: bool = True

    @pydantic.field_validator("base_url")
    @classmethod
    def _url(cls, value: str) -> str:
        url = BASE_URLS.get(value, value)
        if not url.startswith(("https://", "http://")):
            raise ValueError(f"{value!r}: give global, eu or an http(s) URL")
        return url.rstrip("/")

    @pydantic.field_validator("markets")
    @classmethod
    def _markets(cls, value: list[str] | None) -> list[str] | None:
        for market in value or ():
            if not spec.PERP_MARKET_PATTERN.match(market):
                raise ValueError(f"{market!r} is not a perpetual market (<BASE>_PERP)")
        return value

    @pydantic.model_validator(mode="after")
    def _credentials(self) -> _Entry:
        named = (self.api_key_env is not None, self.api_secret_env is not None)
        if self.simulator is not None and any(named):
            raise ValueError("give api_key_env and api_secret_env, or simulator, not both")
        if self.simulator is None and not all(named):
            raise ValueError("give both api_key_env and api_secret_env (or simulator)")
        return self


class _File(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    accounts: list[_Entry] = pydantic.Field(min_length=1)


def load(environ: Mapping[str, str] | None = None) -> tuple[Account, ...]:
    """The accounts: from `WHITEBIT_ACCOUNTS_FILE` when set, else the one of the variables."""
    env = os.environ if environ is None else environ
    path = env.get(ACCOUNTS_FILE_ENV)
    if path:
        return load_file(Path(path), env)
    return (single(env),)


def single(env: Mapping[str, str]) -> Account:
    """The account of the single-account variables: ``default``, unprefixed."""
    configured = bool(env.get(KEY_ENV)) and bool(env.get(SECRET_ENV))
    return Account(
        name=DEFAULT_ACCOUNT,
        base_url=env.get("WHITEBIT_BASE_URL") or spec.GLOBAL_BASE_URL,
        key_env=KEY_ENV if configured else None,
        secret_env=SECRET_ENV if configured else None,
        mining_accounts=names(env.get("WHITEBIT_MINING_ACCOUNTS")),
        markets=names(env.get("WHITEBIT_MARKETS")) or None,
        investments=True,
        simulator_key=None if configured else "partner",
        prefixed=False,
    )


def names(text: str | None) -> tuple[str, ...]:
    """Comma-separated names, trimmed, empty ones dropped."""
    return tuple(n.strip() for n in (text or "").split(",") if n.strip())


def load_file(path: Path, env: Mapping[str, str]) -> tuple[Account, ...]:
    """The accounts of a file, or `AccountsFileError` naming the line and the reason."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise AccountsFileError(f"{path}: cannot be read ({exc.strerror})") from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise AccountsFileError(f"{path}: not YAML: {exc}") from None
    try:
        parsed = _File.model_validate(data if data is not None else {})
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the file"
        raise AccountsFileError(
            f"{path}, line {_line(node, first['loc'])}: {where}: {_message(first)}"
        ) from None
    seen: dict[str, int] = {}
    accounts = []
    for index, entry in enumerate(parsed.accounts):
        line = _line(node, ("accounts", index, "name"))
        if entry.name in seen:
            raise AccountsFileError(
                f"{path}, line {line}: account {entry.name!r} is named twice (first on line "
                f"{seen[entry.name]}): each name is one account's path in the warehouse"
            )
        seen[entry.name] = line
        for field in ("api_key_env", "api_secret_env"):
            variable = getattr(entry, field)
            if variable is not None and not env.get(variable):
                raise AccountsFileError(
                    f"{path}, line {_line(node, ('accounts', index, field))}: account "
                    f"{entry.name!r}: the variable {variable} ({field}) is not set"
                )
        accounts.append(
            Account(
                name=entry.name,
                base_url=entry.base_url,
                key_env=entry.api_key_env,
                secret_env=entry.api_secret_env,
                mining_accounts=tuple(entry.mining_accounts),
                markets=tuple(entry.markets) if entry.markets is not None else None,
                investments=entry.investments,
                simulator_key=entry.simulator,
            )
        )
    return tuple(accounts)


def _message(error: Any) -> str:
    message = str(error["msg"]).removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        return "unknown field"
    if error["type"] == "string_pattern_mismatch":
        return (
            f"{error['input']!r} is not a safe name (lower-case letters, digits and '_', starting "
            "with a letter, at most 40)"
        )
    return message


def _line(node: Any, loc: Sequence[int | str]) -> int:
    """The line (from 1) of the deepest node of ``loc`` the document has."""
    line = node.start_mark.line if node is not None else 0
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            found = [(k, v) for k, v in node.value if k.value == part]
            if not found:
                break
            key, node = found[0]
            line = key.start_mark.line
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
            if part >= len(node.value):
                break
            node = node.value[part]
            line = node.start_mark.line
        else:
            break
    return line + 1
