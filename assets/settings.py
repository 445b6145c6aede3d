"""Every setting whitebit-etl reads, declared once: `Settings`.

The environment is read here and nowhere else, at the edges: a command's start, the code
location's load, a worker's start (`Settings.from_env`). What is read is passed down as values;
a child process gets an environment built explicitly (`child_env`). The variables an accounts
file names for each account's key and secret are read by Dagster itself (`dagster.EnvVar`, so
that it stores their names, never their values); the AWS variables by botocore. Both are listed
here too (`variables`), so that a deployment can check it sets everything the product reads.

A value that cannot be used is refused where it is read, in one line: the variable, its value
(never a secret's) and what it accepts (`SettingsError`). The first day of history is checked
against the day a command or the code location goes by (`check_start`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from datetime import date
from pathlib import Path
from typing import Any, Final, get_args

import pydantic

from pipeline import spec
from warehouse import Warehouse, WarehouseConfig

#: The single-account variables: a one-entry accounts file, account ``default``.
KEY_ENV: Final = "WHITEBIT_API_KEY"
SECRET_ENV: Final = "WHITEBIT_API_SECRET"  # noqa: S105 - the variable's name
SINGLE_ACCOUNT_ENV: Final = (
    KEY_ENV,
    SECRET_ENV,
    "WHITEBIT_BASE_URL",
    "WHITEBIT_MINING_ACCOUNTS",
    "WHITEBIT_MARKETS",
    "WHITEBIT_HISTORIES",
)
#: The form of ``DAGSTER_POSTGRES_URL``: Dagster reads the URL through SQLAlchemy, which must be
#: told to use the driver that comes with dagster-postgres (psycopg2); SQLAlchemy 2.1 takes a bare
#: ``postgresql://`` as psycopg 3, and ``postgres://`` (libpq's) as no driver at all.
POSTGRES_SCHEME: Final = "postgresql+psycopg2://"
#: The warehouse of real accounts, and the one of the embedded simulator's demo accounts (no
#: account configured: the demo's), so that the demo never writes where real runs do.
REAL_ROOT: Final = "./data"
DEMO_ROOT: Final = "./data-demo"
#: Read by botocore (the S3 store), never by our code: credentials, region, endpoint, profile.
AWS_VARIABLES: Final = {
    "AWS_ACCESS_KEY_ID": "the S3 store's access key",
    "AWS_SECRET_ACCESS_KEY": "the S3 store's secret key",
    "AWS_SESSION_TOKEN": "a temporary S3 credential's token",
    "AWS_PROFILE": "the AWS profile holding the S3 credentials",
    "AWS_REGION": "the S3 store's region",
    "AWS_ENDPOINT_URL": "an S3-compatible store's address",
    "AWS_ENDPOINT_URL_S3": "an S3-compatible store's address (S3 only)",
}


#: A reference currency: a ticker of the markets list (capitals and digits).
REFERENCE: Final = re.compile(r"[A-Z0-9]{1,20}")


class SettingsError(ValueError):
    """A setting that cannot be used: which variable, and why."""


def _secret(description: str, variable: str) -> Any:
    return pydantic.Field(None, alias=variable, description=description)


class Settings(pydantic.BaseModel):
    """The product's settings, typed, each field's alias the variable it is read from."""

    model_config = pydantic.ConfigDict(frozen=True, extra="ignore")

    # --- The accounts (`assets.accounts`) ---
    accounts_file: Path | None = pydantic.Field(
        None, alias="WHITEBIT_ACCOUNTS_FILE", description="the accounts file"
    )
    api_key: pydantic.SecretStr | None = _secret("the single account's API key", KEY_ENV)
    api_secret: pydantic.SecretStr | None = _secret("the single account's secret", SECRET_ENV)
    base_url: str | None = pydantic.Field(
        None, alias="WHITEBIT_BASE_URL", description="the single account's exchange address"
    )
    mining_accounts: str | None = pydantic.Field(
        None,
        alias="WHITEBIT_MINING_ACCOUNTS",
        description="the single account's mining accounts, comma-separated",
    )
    markets: str | None = pydantic.Field(
        None,
        alias="WHITEBIT_MARKETS",
        description="the single account's markets walked one by one, comma-separated",
    )
    histories: str | None = pydantic.Field(
        None,
        alias="WHITEBIT_HISTORIES",
        description="the histories the single account extracts, comma-separated (default: all)",
    )
    start_date: date = pydantic.Field(
        date(2024, 1, 1), alias="WHITEBIT_START_DATE", description="the first day of history"
    )
    nightly_cron: str = pydantic.Field(
        "30 0 * * *", alias="WHITEBIT_NIGHTLY_CRON", description="when the nightly runs start"
    )
    prices_cron: str = pydantic.Field(
        "0 1 * * *",
        alias="WHITEBIT_PRICES_CRON",
        description="when the exchange's prices are read: after the nightly runs end, before "
        "the 02:30 watch",
    )
    reference_currency: str = pydantic.Field(
        spec.REFERENCE_CURRENCY,
        alias="WHITEBIT_REFERENCE_CURRENCY",
        description="the currency prices are told in (a ticker, as the markets list writes it)",
    )
    pacing_dir: Path | None = pydantic.Field(
        None,
        alias="WHITEBIT_PACING_DIR",
        description="where the machine's runs share each exchange address's pacing",
    )
    # --- The warehouse (`warehouse.Warehouse`) ---
    warehouse_root: str | None = pydantic.Field(
        None, alias="WAREHOUSE_ROOT", description="where the warehouse lives"
    )
    warehouse_catalog: Path | None = pydantic.Field(
        None, alias="WAREHOUSE_CATALOG", description="the DuckDB catalog file"
    )
    state_home: Path | None = pydantic.Field(
        None, alias="XDG_STATE_HOME", description="where a remote warehouse's local files live"
    )
    lease_seconds: float = pydantic.Field(
        30.0,
        gt=0,
        alias="WAREHOUSE_LEASE_SECONDS",
        description="how long an S3 writer's lease outlives its last renewal",
    )
    lease_wait_seconds: float = pydantic.Field(
        900.0,
        gt=0,
        alias="WAREHOUSE_LEASE_WAIT_SECONDS",
        description="how long a writer waits for an S3 lease another keeps",
    )
    # --- Dagster, the service and its workers (`assets.instance`, `assets.service`) ---
    dagster_home: Path | None = pydantic.Field(
        None, alias="DAGSTER_HOME", description="the Dagster instance's home"
    )
    postgres_url: pydantic.SecretStr | None = _secret(
        "the Dagster instance's PostgreSQL", "DAGSTER_POSTGRES_URL"
    )
    broker_url: pydantic.SecretStr | None = _secret(
        "the Celery broker of the runs", "CELERY_BROKER_URL"
    )
    result_backend: pydantic.SecretStr | None = _secret(
        "the Celery result backend (default: the broker)", "CELERY_RESULT_BACKEND"
    )
    alert_webhook_url: pydantic.SecretStr | None = _secret(
        "where failed runs are posted", "WHITEBIT_ALERT_WEBHOOK_URL"
    )
    ui_url: str | None = pydantic.Field(
        None, alias="WHITEBIT_UI_URL", description="the Dagster UI's address, for alert links"
    )
    #: The environment read (children inherit it; an accounts file's variables are in it).
    environ: Mapping[str, str] = pydantic.Field(default_factory=dict, exclude=True, repr=False)

    @pydantic.field_validator("nightly_cron", "prices_cron")
    @classmethod
    def _cron(cls, value: str) -> str:
        # Dagster's own rule, loaded only when the variable is set (--help stays instant).
        import dagster as dg

        try:
            dg.ScheduleDefinition(
                name="nightly", cron_schedule=value, job_name="nightly", execution_timezone="UTC"
            )
        except dg.DagsterInvalidDefinitionError:
            raise ValueError(
                f"{value!r} is not a cron schedule: give five fields, minute hour day month "
                "weekday (UTC), like '30 0 * * *'"
            ) from None
        return value

    @pydantic.field_validator("reference_currency")
    @classmethod
    def _reference(cls, value: str) -> str:
        if not REFERENCE.fullmatch(value):
            raise ValueError(
                f"{value!r} is not a ticker as the markets list writes one: give capitals and "
                "digits, like USDT"
            )
        return value

    @pydantic.field_validator("postgres_url")
    @classmethod
    def _postgres_url(cls, value: pydantic.SecretStr | None) -> pydantic.SecretStr | None:
        url = value.get_secret_value() if value is not None else ""
        if url and not url.startswith(POSTGRES_SCHEME):
            # The URL holds a password: only its scheme may be named.
            scheme = url.split("://", 1)[0] if "://" in url else ""
            shown = (
                f"a {scheme}:// URL (the rest not shown: it holds a password)"
                if re.fullmatch(r"[a-z][a-z0-9+.-]*", scheme)
                else "not a URL (not shown: it may hold a password)"
            )
            raise ValueError(
                f"{shown}: give {POSTGRES_SCHEME}user:password@host:5432/dagster, the form "
                "dagster-postgres reads"
            )
        return value

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """The settings of this process's environment (or ``environ``); an empty variable is an
        unset one. A value that cannot be used is `SettingsError`, naming the variable."""
        env = dict(os.environ if environ is None else environ)
        given = {name: value for name, value in env.items() if value != ""}
        try:
            return cls.model_validate({**given, "environ": env})
        except pydantic.ValidationError as exc:
            error = exc.errors()[0]
            variable = ".".join(str(part) for part in error["loc"])
            message = str(error["msg"])
            if error["type"] == "value_error":  # a check's own reason, quoting what it may
                refused = message.removeprefix("Value error, ")
            elif variable in cls._secrets():
                refused = message
            else:
                refused = f"{given.get(variable)!r}: {message}"
            raise SettingsError(f"{variable}: {refused}") from None

    @classmethod
    def _secrets(cls) -> set[str]:
        """The variables whose values are never shown."""
        return {
            field.alias
            for field in cls.model_fields.values()
            if field.alias and pydantic.SecretStr in (field.annotation, *get_args(field.annotation))
        }

    def check_start(self, today: date) -> Settings:
        """These settings, when their first day of history is ``today`` or before; else
        `SettingsError` (no day of history would exist for a run to fill)."""
        if self.start_date > today:
            raise SettingsError(
                f"WHITEBIT_START_DATE: '{self.start_date}' is in the future: give the first day "
                f"of history, YYYY-MM-DD, today ({today}, UTC) or before"
            )
        return self

    @classmethod
    def variables(cls) -> dict[str, str]:
        """Every variable the product reads, with what it is for: those read here, and those
        botocore reads; an accounts file adds the variables it names."""
        own = {
            field.alias: field.description or ""
            for field in cls.model_fields.values()
            if field.alias is not None
        }
        return own | AWS_VARIABLES

    @property
    def single_account_set(self) -> tuple[str, ...]:
        """The single-account variables that are set."""
        return tuple(name for name in SINGLE_ACCOUNT_ENV if self.environ.get(name))

    @property
    def root(self) -> str:
        """`WAREHOUSE_ROOT`, else `WAREHOUSE_ROOT`'s default: the demo's with no account
        configured (the embedded simulator's demo accounts)."""
        configured = self.accounts_file is not None or bool(self.single_account_set)
        return self.warehouse_root or (REAL_ROOT if configured else DEMO_ROOT)

    def warehouse_config(self, root: str | None = None) -> WarehouseConfig:
        return WarehouseConfig(
            root=root or self.root,
            catalog=str(self.warehouse_catalog) if self.warehouse_catalog else None,
            state_home=str(self.state_home) if self.state_home else None,
            lease_seconds=self.lease_seconds,
            lease_wait_seconds=self.lease_wait_seconds,
            reference=self.reference_currency,
        )

    def warehouse(self, root: str | None = None) -> Warehouse:
        """The warehouse (at ``root``, else `WAREHOUSE_ROOT`), its root resolved once."""
        return Warehouse.of(self.warehouse_config(root))

    def child_env(
        self, also: Mapping[str, str] | None = None, *, without: tuple[str, ...] = ()
    ) -> dict[str, str]:
        """The environment of a child process: this one's, less the variables ``without``
        names, with ``also``."""
        return {k: v for k, v in self.environ.items() if k not in without} | dict(also or {})
