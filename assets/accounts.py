"""The accounts a deployment extracts: `accounts.yaml`, the single-account variables, or the
embedded simulator's.

The file (its path in `WHITEBIT_ACCOUNTS_FILE`) lists each account: a short name (the ``account``
of every row and a segment of every path), its base URL (``global``, ``eu`` or a URL), the *names*
of the variables that hold its key and secret (never the values), its mining-pool accounts and
markets, whether its key may read the investments history (B2B partner keys only), and whether
it is a main account's key (which lists the sub-accounts and their transfers), and which of the
account's histories it extracts (all by default: `spec.HISTORIES`, those nested in another
come with it). An account may instead name a key of the embedded simulator (``simulator:
sub_1``): the demo's and the tests' accounts. See ``accounts.example.yaml``.

A file that is wrong is refused as a whole when it is loaded, before any request, with the line
and the reason: an unknown field, a duplicate name, a name that is not a safe path segment, an
address that would send signed requests in the clear, a variable's name that is not one (never
repeated: it may be the secret itself, written where its variable's name belongs), a variable
that is not set.

Without the file, the single-account variables (`WHITEBIT_API_KEY`, `WHITEBIT_API_SECRET`,
`WHITEBIT_BASE_URL`, `WHITEBIT_MINING_ACCOUNTS`, `WHITEBIT_MARKETS`, `WHITEBIT_HISTORIES`) are a
one-entry accounts file: one account named ``default``, its values checked by the same rules as
the file's fields and refused with the same reasons, naming the variable; a key without its
secret (or any of them without both) is refused, naming what is missing. With none of them set,
the accounts are the embedded simulator's demo accounts (`SIMULATOR_ACCOUNTS`: its main account
and a sub-account), for every command alike.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Final, Literal
from urllib.parse import urlsplit

import pydantic
import yaml

from pipeline import spec
from pipeline.whitebit import checked_base_url
from warehouse.schemas import ACCOUNT_NAME, EXCHANGE

from .settings import KEY_ENV, SECRET_ENV, Settings, SettingsError

#: The one account of the single-account variables.
DEFAULT_ACCOUNT: Final = "default"
#: The embedded simulator's accounts, when no account is configured (the demo's).
SIMULATOR_ACCOUNTS: Final = "accounts.demo.yaml"
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
#: A variable's name, as a shell writes one.
VARIABLE_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class AccountsFileError(SettingsError):
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
    #: The key is a main account's: it lists its sub-accounts and their transfers (a
    #: sub-account's key may not).
    subaccounts: bool = True
    #: The embedded simulator's key this account uses, when it has no credentials.
    simulator_key: str | None = None
    #: The histories it extracts (names); None: every one its key may read.
    histories: frozenset[str] | None = None

    @property
    def simulated(self) -> bool:
        return self.key_env is None

    @property
    def key_prefix(self) -> list[str]:
        return [self.name]

    @property
    def resource_key(self) -> str:
        """The Dagster resource of its exchange."""
        return f"whitebit_{self.name}"

    @property
    def pool(self) -> str:
        """The Dagster pool its API steps hold: one step per account at a time."""
        return f"whitebit_api_{self.name}"

    @property
    def group(self) -> str:
        return self.name

    def extracts(self, history: spec.History) -> bool:
        """Whether the account extracts the history: it is among its ``histories`` and its key
        may read it (its accounts-file switch: B2B access for the investments, a main account's
        key for its sub-accounts)."""
        chosen = self.histories is None or history.name in self.histories
        return chosen and (history.access is None or bool(getattr(self, history.access)))

    @property
    def extracts_all(self) -> bool:
        """Whether it extracts every history its key may read (what a reconciliation needs)."""
        readable = (
            h
            for h in spec.HISTORIES.values()
            if h.nested_in is None and (h.access is None or getattr(self, h.access))
        )
        return self.histories is None or all(h.name in self.histories for h in readable)

    def setting(self, name: str) -> tuple[str, ...] | None:
        """An account setting a history's paging names (its markets, its mining accounts)."""
        value: tuple[str, ...] | None = getattr(self, name)
        return value


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
    subaccounts: bool = True
    histories: list[str] | None = pydantic.Field(default=None, min_length=1)

    @pydantic.field_validator("name")
    @classmethod
    def _not_the_exchange(cls, value: str) -> str:
        if value == EXCHANGE:
            raise ValueError(f"{EXCHANGE!r} is the name the exchange's prices are kept under")
        return value

    @pydantic.field_validator("base_url")
    @classmethod
    def _url(cls, value: str) -> str:
        return base_url(value)

    @pydantic.field_validator("api_key_env", "api_secret_env")
    @classmethod
    def _variable(cls, value: str | None) -> str | None:
        # Never repeated: a value that is not a name may be the key or the secret itself.
        if value is not None and not VARIABLE_NAME.fullmatch(value):
            raise ValueError(
                "not a variable name (letters, digits and '_'; the value is not repeated): "
                "give the name of the variable that holds the key or the secret, never the "
                "value itself"
            )
        return value

    @pydantic.field_validator("markets")
    @classmethod
    def _markets(cls, value: list[str] | None) -> list[str] | None:
        for market in value or ():
            if not spec.PERP_MARKET_PATTERN.match(market):
                raise ValueError(f"{market!r} is not a perpetual market (<BASE>_PERP)")
        return value

    @pydantic.field_validator("histories")
    @classmethod
    def _histories(cls, value: list[str] | None) -> list[str] | None:
        return None if value is None else list(history_names(value))

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


def load(settings: Settings) -> tuple[Account, ...]:
    """The accounts: the accounts file's, else the one of the single-account variables, else the
    embedded simulator's."""
    if settings.accounts_file is not None:
        return load_file(settings.accounts_file, settings.environ)
    if settings.single_account_set:
        return (single(settings),)
    demo = resources.files("assets").joinpath(SIMULATOR_ACCOUNTS)
    return load_file(Path(str(demo)), settings.environ)


#: The single-account variable of each field of the accounts file.
_SINGLE_FIELDS: Final = {
    "api_key_env": KEY_ENV,
    "api_secret_env": SECRET_ENV,
    "base_url": "WHITEBIT_BASE_URL",
    "mining_accounts": "WHITEBIT_MINING_ACCOUNTS",
    "markets": "WHITEBIT_MARKETS",
    "histories": "WHITEBIT_HISTORIES",
}


def single(settings: Settings) -> Account:
    """The account of the single-account variables: ``default``, a file's entry whose fields are
    the variables' values, refused as the file's would be, naming the variable. Any of them set
    without the key and the secret is refused, naming what is missing: a run must never extract
    the embedded simulator into a warehouse meant for a real account."""
    missing = [name for name in (KEY_ENV, SECRET_ENV) if not settings.environ.get(name)]
    if missing:
        given = ", ".join(settings.single_account_set)
        raise SettingsError(
            f"{' and '.join(missing)} not set (with {given} set): give the account's key and "
            "secret, or unset every WHITEBIT_ variable to run against the embedded simulator"
        )
    fields = {
        "base_url": settings.base_url,
        "mining_accounts": list(names(settings.mining_accounts)),
        "markets": list(names(settings.markets)) or None,
        "histories": list(names(settings.histories)) or None,
    }
    try:
        entry = _Entry.model_validate(
            {
                "name": DEFAULT_ACCOUNT,
                "api_key_env": KEY_ENV,
                "api_secret_env": SECRET_ENV,
                **{field: value for field, value in fields.items() if value is not None},
            }
        )
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        raise SettingsError(f"{_SINGLE_FIELDS[str(first['loc'][0])]}: {_message(first)}") from None
    return _account(entry)


def history_names(chosen: Sequence[str]) -> frozenset[str]:
    """Names of histories an account extracts, or `ValueError` naming one that is not (a history
    nested in another comes with it, and is not named)."""
    extracted = [h.name for h in spec.HISTORIES.values() if h.nested_in is None]
    for name in chosen:
        if name not in extracted:
            raise ValueError(f"{name!r} is not a history (one of: {', '.join(extracted)})")
    return frozenset(chosen)


def base_url(value: str) -> str:
    """An exchange address: ``global``, ``eu`` or an http(s) URL, without user info (never
    echoed: what comes before '@' may be a credential)."""
    url = BASE_URLS.get(value, value)
    parts = urlsplit(url)
    if "@" in parts.netloc:
        shown = parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()
        raise ValueError(
            f"{shown} carries user info before '@': the key and secret go in the variables "
            "the account names, never in the address"
        )
    if not url.startswith(("https://", "http://")):
        raise ValueError(f"{value!r}: give global, eu or an http(s) URL")
    try:
        checked_base_url(url)  # the client's own rule: https://, or http:// on loopback only
    except ValueError as exc:
        raise ValueError(f"{value!r}: {exc}") from None
    return url.rstrip("/")


def names(text: str | None) -> tuple[str, ...]:
    """Comma-separated names, trimmed, empty ones dropped."""
    return tuple(n.strip() for n in (text or "").split(",") if n.strip())


def load_file(path: Path, env: Mapping[str, str]) -> tuple[Account, ...]:
    """The accounts of a file, or `AccountsFileError` naming the line and the reason."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise AccountsFileError(f"{path}: cannot be read ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise AccountsFileError(
            f"{path}: not UTF-8 text (byte {exc.start} is {exc.object[exc.start]:#04x}): an "
            "accounts file is YAML, as accounts.example.yaml"
        ) from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        # Its problem and where, never the excerpt of the line PyYAML adds: it may hold a secret.
        mark = getattr(exc, "problem_mark", None)
        where = f", line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "cannot be parsed"
        raise AccountsFileError(f"{path}{where}: not YAML: {problem}") from None
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
        accounts.append(_account(entry))
    return tuple(accounts)


def _account(entry: _Entry) -> Account:
    return Account(
        name=entry.name,
        base_url=entry.base_url,
        key_env=entry.api_key_env,
        secret_env=entry.api_secret_env,
        mining_accounts=tuple(entry.mining_accounts),
        markets=tuple(entry.markets) if entry.markets is not None else None,
        investments=entry.investments,
        subaccounts=entry.subaccounts,
        simulator_key=entry.simulator,
        histories=frozenset(entry.histories) if entry.histories is not None else None,
    )


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
