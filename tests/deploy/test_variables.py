"""Every environment variable the product reads is set on the Kubernetes deployment.

The settings module declares every variable the product reads (`Settings.variables`: those it
reads itself, and those botocore reads for the S3 store); it is the only module that reads the
environment (`test_only_the_settings_module_reads_the_environment`). Each of them is set in
`deploy/helm/values.yaml`, on the code server and on the runs, or is exempted below with its
reason: a new setting without an entry fails here. The variables the accounts file names (each
account's key and secret) come from the Secret whitebit-api-keys. The accounts file is mounted
where its variable points, and the docs create every Secret and ConfigMap the values name.

Each check returns what it finds wrong, and is also run on a spoiled copy of its input, so that
it is seen to fail.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pydantic
import yaml

from assets.instance import instance_config
from assets.settings import Settings
from tests.deploy.values import (
    ROOT,
)
from tests.deploy.values import (
    deployment as _deployment,
)
from tests.deploy.values import (
    launcher as _launcher,
)
from tests.deploy.values import (
    load_values as _values,
)
from tests.deploy.values import (
    names as _names,
)

DOCS = ROOT / "docs" / "many-machines.md"
PRODUCT = ("assets", "warehouse", "pipeline")
#: The accounts file the deployment's ConfigMap is made from, as the docs show it.
ACCOUNTS_FILE = ROOT / "accounts.example.yaml"

#: Variables the product reads that the deployment leaves unset, and why.
EXEMPT: Mapping[str, str] = {
    "WHITEBIT_API_KEY": "single-account mode; the accounts file replaces it",
    "WHITEBIT_API_SECRET": "single-account mode; the accounts file replaces it",
    "WHITEBIT_BASE_URL": "single-account mode; each account of the file has its base_url",
    "WHITEBIT_MINING_ACCOUNTS": "single-account mode; each account of the file has its own",
    "WHITEBIT_MARKETS": "single-account mode; each account of the file has its own",
    "WHITEBIT_HISTORIES": "single-account mode; each account of the file has its own",
    "DAGSTER_POSTGRES_URL": "read by `whitebit-etl serve` and the CLI for their own instance; "
    "the chart's instance reads its password from the Secret as DAGSTER_PG_PASSWORD",
    "DAGSTER_HOME": "set by the chart on every pod (global.dagsterHome)",
    "CELERY_BROKER_URL": "the Celery launcher's (serve --workers, whitebit-etl worker); on "
    "Kubernetes runs are Jobs of the K8sRunLauncher",
    "CELERY_RESULT_BACKEND": "the Celery launcher's, as CELERY_BROKER_URL",
    "AWS_SESSION_TOKEN": "a temporary credential's; the deployment's key pair is a lasting one",
    "AWS_PROFILE": "a profile file's; the pods get the key pair as variables",
    "AWS_ENDPOINT_URL": "an S3-compatible store's; the deployment's store is AWS S3",
    "AWS_ENDPOINT_URL_S3": "an S3-compatible store's, as AWS_ENDPOINT_URL",
}
#: The Secret holding the variables the accounts file names.
ACCOUNT_KEYS_SECRET = "whitebit-api-keys"


# --- (a) every variable the product reads ---------------------------------------------------


def account_variables(accounts_file: Path) -> set[str]:
    """The variables an accounts file names for its accounts' keys and secrets."""
    loaded = yaml.safe_load(accounts_file.read_text(encoding="utf-8"))
    return {
        account[field]
        for account in loaded["accounts"]
        for field in ("api_key_env", "api_secret_env")
        if account.get(field)
    }


def missing_settings(
    values: Mapping[str, Any], read: Iterable[str], accounts: Iterable[str] = ()
) -> list[str]:
    """What the values leave unset on the code server or on the runs, of the settings ``read``
    and of the variables the accounts file names (``accounts``)."""
    problems = []
    root = {e["name"]: e.get("value") for e in _deployment(values).get("env") or ()}
    if not str(root.get("WAREHOUSE_ROOT", "")).startswith("s3://"):
        problems.append("WAREHOUSE_ROOT is not an s3:// root: pods share no local disk")
    required = set(read) - set(EXEMPT)
    places = {
        "the code server (dagster-user-deployments.deployments[0].env)": (
            _names(_deployment(values).get("env")),
            _deployment(values).get("envSecrets"),
        ),
        "the runs (runLauncher.config.k8sRunLauncher.runK8sConfig.containerConfig.env)": (
            _names(
                ((_launcher(values).get("runK8sConfig") or {}).get("containerConfig") or {}).get(
                    "env"
                )
            ),
            _launcher(values).get("envSecrets"),
        ),
    }
    for place, (names, secrets) in places.items():
        problems += [f"{name} is not set on {place}" for name in sorted(required - names)]
        from_file = sorted(set(accounts) - names)
        if from_file and ACCOUNT_KEYS_SECRET not in _names(secrets):
            problems.append(
                f"the Secret {ACCOUNT_KEYS_SECRET} is not in envSecrets of {place}: "
                f"{', '.join(from_file)} (named by the accounts file) are not set there"
            )
    return problems


def test_every_variable_the_product_reads_is_set_on_the_code_server_and_the_runs() -> None:
    read = set(Settings.variables())
    assert not set(EXEMPT) - read, f"exempted but never read: {sorted(set(EXEMPT) - read)}"
    # The settings name what the modules read.
    assert {"WAREHOUSE_ROOT", "WHITEBIT_ACCOUNTS_FILE", "WHITEBIT_NIGHTLY_CRON"} <= read
    assert {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"} <= read - set(EXEMPT)
    accounts = account_variables(ACCOUNTS_FILE)
    assert "WHITEBIT_MAIN_API_KEY" in accounts
    assert missing_settings(_values(), read, accounts) == []


def test_every_variable_is_declared_with_what_it_is_for() -> None:
    for name, description in Settings.variables().items():
        assert re.fullmatch(r"[A-Z][A-Z0-9_]*", name), name
        assert description, f"{name} says nothing of what it is for"


def _string_sources(config: object) -> Iterator[str]:
    """The variables a Dagster configuration reads (``{"env": NAME}``)."""
    if isinstance(config, Mapping):
        if set(config) == {"env"}:
            yield config["env"]
            return
        for value in config.values():
            yield from _string_sources(value)
    elif isinstance(config, list):
        for value in config:
            yield from _string_sources(value)


def test_the_variables_dagster_reads_for_the_instance_are_declared_settings() -> None:
    read = set(_string_sources(instance_config(postgres=True, celery=True)))
    assert read == {"DAGSTER_POSTGRES_URL", "CELERY_BROKER_URL", "CELERY_RESULT_BACKEND"}
    assert read <= set(Settings.variables())


def test_a_new_variable_without_a_values_entry_fails() -> None:
    class Grown(Settings):
        new_limit: int = pydantic.Field(
            7, alias="WHITEBIT_NEW_LIMIT", description="a setting added later"
        )

    read = set(Grown.variables())
    assert read - set(Settings.variables()) == {"WHITEBIT_NEW_LIMIT"}
    problems = missing_settings(_values(), read)
    assert any("WHITEBIT_NEW_LIMIT is not set on the runs" in p for p in problems)
    assert any("WHITEBIT_NEW_LIMIT is not set on the code server" in p for p in problems)
    spoiled = copy.deepcopy(_values())
    spoiled["runLauncher"]["config"]["k8sRunLauncher"]["envSecrets"] = []
    accounts = account_variables(ACCOUNTS_FILE)
    (problem,) = missing_settings(spoiled, set(), accounts)
    assert ACCOUNT_KEYS_SECRET in problem
    assert "of the runs" in problem
    assert "WHITEBIT_MAIN_API_KEY" in problem
    spoiled = copy.deepcopy(_values())
    spoiled["dagster-user-deployments"]["deployments"][0]["env"][0]["value"] = "/data"
    assert missing_settings(spoiled, set()) == [
        "WAREHOUSE_ROOT is not an s3:// root: pods share no local disk"
    ]


# --- (b) the settings module reads the environment, and nothing else does -----------------------

#: The one module that reads the environment, the one place that passes it on to a child
#: process of its own making (the spawned simulator: its environment, explicitly), and the one
#: that sets a child's (a forked writer takes its load's, which the caller built).
READS_THE_ENVIRONMENT = {
    Path("assets/settings.py"),
    Path("pipeline/simulator/_server.py"),
    Path("warehouse/writer.py"),
}
#: What the refactor removed for good: a second way to tell a local root, Dagster's private
#: implicit job, and the adoption of a warehouse written before accounts.
GONE = ("is_local(", "__ephemeral_asset_job__", "adopt_unaccounted")


def _product_sources(base: Path) -> dict[Path, str]:
    return {
        path.relative_to(base): path.read_text(encoding="utf-8")
        for package in PRODUCT
        for path in sorted((base / package).rglob("*"))
        if path.is_file() and path.suffix in (".py", ".yaml", ".sql", ".j2")
    }


def places(sources: Mapping[Path, str], pattern: str) -> dict[Path, list[int]]:
    """The lines of each source that hold ``pattern`` (a regular expression)."""
    found: dict[Path, list[int]] = {}
    for path, text in sources.items():
        lines = [n for n, line in enumerate(text.splitlines(), 1) if re.search(pattern, line)]
        if lines:
            found[path] = lines
    return found


ENVIRONMENT_READ = r"\bos\.environ\b|\bgetenv\b|from os import[^#]*\benviron\b"


def test_only_the_settings_module_reads_the_environment() -> None:
    sources = _product_sources(ROOT)
    assert Path("assets/settings.py") in sources
    readers = places(sources, ENVIRONMENT_READ)
    assert set(readers) <= READS_THE_ENVIRONMENT, {
        path: lines for path, lines in readers.items() if path not in READS_THE_ENVIRONMENT
    }
    assert Path("assets/settings.py") in readers
    # The simulator's child gets an environment built there and then.
    for line in readers.get(Path("pipeline/simulator/_server.py"), []):
        text = sources[Path("pipeline/simulator/_server.py")].splitlines()[line - 1]
        assert "env={**os.environ" in text, text
    # A forked writer's environment is replaced by its load's, never read.
    for line in readers.get(Path("warehouse/writer.py"), []):
        text = sources[Path("warehouse/writer.py")].splitlines()[line - 1].strip()
        assert text in ("os.environ.clear()", 'os.environ.update(body["env"])'), text


def test_what_the_refactor_removed_is_nowhere_in_the_product() -> None:
    sources = _product_sources(ROOT)
    for gone in GONE:
        assert places(sources, re.escape(gone)) == {}, gone


def test_the_scan_finds_a_read_of_the_environment_wherever_it_is(tmp_path: Path) -> None:
    (tmp_path / "warehouse").mkdir()
    (tmp_path / "warehouse" / "settings.py").write_text(
        "import os\nROOT = os.environ.get('WAREHOUSE_ROOT')\nHOME = os.getenv('HOME')\n"
        "from os import environ\n",
        encoding="utf-8",
    )
    (tmp_path / "assets").mkdir()
    (tmp_path / "assets" / "jobs.py").write_text(
        "def run(job):\n    return job.name == '__ephemeral_asset_job__'\n", encoding="utf-8"
    )
    sources = _product_sources(tmp_path)
    assert places(sources, ENVIRONMENT_READ) == {Path("warehouse/settings.py"): [2, 3, 4]}
    assert places(sources, re.escape("__ephemeral_asset_job__")) == {Path("assets/jobs.py"): [2]}


# --- (c) the accounts file, the Secrets and the ConfigMap ------------------------------------


def test_the_accounts_file_is_mounted_where_its_variable_points() -> None:
    values = _values()
    settings = {e["name"]: e.get("value") for e in _deployment(values)["env"]}
    accounts = Path(settings["WHITEBIT_ACCOUNTS_FILE"])
    for volumes, mounts in (
        (_deployment(values)["volumes"], _deployment(values)["volumeMounts"]),
        (_launcher(values)["volumes"], _launcher(values)["volumeMounts"]),
    ):
        config_maps = {v["name"]: v["configMap"]["name"] for v in volumes if "configMap" in v}
        mounted = {m["mountPath"]: m["name"] for m in mounts}
        assert config_maps.get(mounted.get(str(accounts.parent), "")) == "whitebit-accounts"


def test_the_docs_create_every_secret_and_the_configmap_the_values_name() -> None:
    text = DOCS.read_text(encoding="utf-8")
    values = _values()
    named = {
        ref["secretKeyRef"]["name"]
        for entry in _deployment(values)["env"]
        if (ref := entry.get("valueFrom"))
    }
    named |= _names(_deployment(values)["envSecrets"]) | {values["global"]["postgresqlSecretName"]}
    for secret in sorted(named):
        assert f"create secret generic {secret}" in text, secret
    assert "create configmap whitebit-accounts" in text
    # The Secret of the keys holds one entry per variable the accounts file names.
    for variable in sorted(account_variables(ACCOUNTS_FILE)):
        assert f"{variable}=" in text, variable
