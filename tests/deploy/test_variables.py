"""Every environment variable the product reads is set on the Kubernetes deployment.

Every variable read in the code of `assets`, `warehouse` and `pipeline` (found by reading that
code) is set in `deploy/helm/values.yaml`, on the code server and on the runs, or is exempted
below with its reason: a new variable without an entry fails here. The accounts file is mounted
where its variable points, and the docs create every Secret and ConfigMap the values name.

Each check returns what it finds wrong, and is also run on a spoiled copy of its input, so that
it is seen to fail.
"""

from __future__ import annotations

import ast
import copy
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

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

#: Variables the product reads that the deployment leaves unset, and why.
EXEMPT: Mapping[str, str] = {
    "WHITEBIT_API_KEY": "single-account mode; the accounts file replaces it",
    "WHITEBIT_API_SECRET": "single-account mode; the accounts file replaces it",
    "WHITEBIT_BASE_URL": "single-account mode; each account of the file has its base_url",
    "WHITEBIT_MINING_ACCOUNTS": "single-account mode; each account of the file has its own",
    "WHITEBIT_MARKETS": "single-account mode; each account of the file has its own",
    "DAGSTER_POSTGRES_URL": "read by `whitebit-etl serve` and the CLI for their own instance; "
    "the chart's instance reads its password from the Secret as DAGSTER_PG_PASSWORD",
    "DAGSTER_HOME": "set by the chart on every pod (global.dagsterHome)",
    "CELERY_BROKER_URL": "the Celery launcher's (serve --workers, whitebit-etl worker); on "
    "Kubernetes runs are Jobs of the K8sRunLauncher",
    "CELERY_RESULT_BACKEND": "the Celery launcher's, as CELERY_BROKER_URL",
}
#: Read for the product by the libraries it uses: WAREHOUSE_ROOT is s3://, so s3fs (botocore)
#: needs credentials and a region.
S3_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION")
#: Module-level constants named so hold a variable's name (or a tuple of names).
_CONSTANT = re.compile(r"_(ENV|ENVS|VARIABLE|VARIABLES)$")
#: Places that read a variable whose name is not a literal or a constant, and where it comes from.
DYNAMIC_READS: Mapping[tuple[str, str], str] = {
    ("warehouse.lease", "_seconds"): "LEASE_SECONDS_ENV and WAIT_SECONDS_ENV (constants)",
    ("assets.alerts", "_scrubbed"): "_SECRET_ENVS (a constant)",
    ("assets.cli", "demo"): "CREDENTIAL_VARIABLES and ACCOUNTS_FILE_ENV (constants)",
    ("assets.accounts", "load_file"): "the variables the accounts file names (whitebit-api-keys)",
    ("assets.definitions", "whitebit_resource"): "the accounts file's variables, as EnvVar",
}
#: The Secret holding the variables the accounts file names.
ACCOUNT_KEYS_SECRET = "whitebit-api-keys"


# --- (a) every variable the product reads ---------------------------------------------------


def _module(path: Path, base: Path) -> str:
    return ".".join(path.relative_to(base).with_suffix("").parts).removesuffix(".__init__")


def _strings(node: ast.expr | None) -> tuple[str, ...] | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return (node.value,)
    if isinstance(node, ast.Tuple | ast.List):
        parts = [_strings(element) for element in node.elts]
        if all(part is not None for part in parts):
            return tuple(s for part in parts for s in part or ())
    return None


def _is_environ(node: ast.expr) -> bool:
    """``os.environ``, or a name the product gives an environment mapping (``env``, ``environ``)."""
    if isinstance(node, ast.Attribute) and node.attr == "environ":
        return isinstance(node.value, ast.Name) and node.value.id == "os"
    return isinstance(node, ast.Name) and node.id in ("env", "environ")


def _read_argument(node: ast.AST) -> ast.expr | None:
    """The name argument when ``node`` reads an environment variable: ``os.environ.get(x)``,
    ``env.get(x)``, ``os.getenv(x)``, ``os.environ[x]``, ``EnvVar(x)``, ``{"env": x}`` (a
    Dagster string source)."""
    if isinstance(node, ast.Call) and node.args:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "get" and _is_environ(func.value):
            return node.args[0]
        if isinstance(func, ast.Attribute) and func.attr == "getenv":
            return node.args[0]
        if (isinstance(func, ast.Attribute) and func.attr == "EnvVar") or (
            isinstance(func, ast.Name) and func.id == "EnvVar"
        ):
            return node.args[0]
    if (
        isinstance(node, ast.Subscript)
        and isinstance(node.ctx, ast.Load)
        and _is_environ(node.value)
    ):
        return node.slice
    if isinstance(node, ast.Dict) and len(node.keys) == 1:
        key = node.keys[0]
        if isinstance(key, ast.Constant) and key.value == "env":
            return node.values[0]
    return None


def _walk(node: ast.AST, function: str) -> Iterator[tuple[ast.AST, str]]:
    """Every node below ``node``, with the name of the function it is in."""
    for child in ast.iter_child_nodes(node):
        inner = (
            child.name if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else function
        )
        yield child, inner
        yield from _walk(child, inner)


def environment_reads(base: Path, packages: tuple[str, ...]) -> tuple[set[str], set[str]]:
    """The variables the code under ``base/<package>`` reads, and the places that read one
    whose name cannot be told from the code (``module:function``), for `DYNAMIC_READS`."""
    paths = {
        _module(path, base): path for package in packages for path in (base / package).rglob("*.py")
    }
    trees = {module: ast.parse(path.read_text(encoding="utf-8")) for module, path in paths.items()}
    constants: dict[tuple[str, str], tuple[str, ...]] = {}
    imports: dict[tuple[str, str], tuple[str, str]] = {}
    names: set[str] = set()
    for module, tree in trees.items():
        for statement in tree.body:
            if isinstance(statement, ast.Assign | ast.AnnAssign):
                targets = (
                    statement.targets if isinstance(statement, ast.Assign) else [statement.target]
                )
                value = _strings(statement.value)
                for target in targets:
                    if isinstance(target, ast.Name) and value is not None:
                        constants[module, target.id] = value
                        if _CONSTANT.search(target.id):
                            names.update(value)
        for node in ast.walk(tree):  # imports inside functions too
            if isinstance(node, ast.ImportFrom):
                package = module.split(".")
                if paths[module].name != "__init__.py":
                    package = package[:-1]
                if node.level:
                    package = package[: len(package) - (node.level - 1)]
                source = ".".join(
                    [*package, node.module or ""] if node.level else [node.module or ""]
                )
                for alias in node.names:
                    imports[module, alias.asname or alias.name] = (source.rstrip("."), alias.name)

    def resolve(module: str, name: str) -> tuple[str, ...] | None:
        seen = 0
        while (module, name) not in constants and (module, name) in imports and seen < 10:
            module, name = imports[module, name]
            seen += 1
        return constants.get((module, name))

    unresolved: set[str] = set()
    for module, tree in trees.items():
        for node, function in _walk(tree, "<module>"):
            argument = _read_argument(node)
            if argument is None:
                continue
            found = _strings(argument)
            if found is None and isinstance(argument, ast.Name):
                found = resolve(module, argument.id)
            if found is None:
                unresolved.add(f"{module}:{function}")
            else:
                names.update(found)
    return names, unresolved


def missing_settings(values: Mapping[str, Any], read: set[str]) -> list[str]:
    """What the values leave unset on the code server or on the runs."""
    problems = []
    root = {e["name"]: e.get("value") for e in _deployment(values).get("env") or ()}
    required = set(read) - set(EXEMPT)
    if str(root.get("WAREHOUSE_ROOT", "")).startswith("s3://"):
        required |= set(S3_VARIABLES)
    else:
        problems.append("WAREHOUSE_ROOT is not an s3:// root: pods share no local disk")
    places = {
        "the code server (dagster-user-deployments.deployments[0].env)": _names(
            _deployment(values).get("env")
        ),
        "the runs (runLauncher.config.k8sRunLauncher.runK8sConfig.containerConfig.env)": _names(
            ((_launcher(values).get("runK8sConfig") or {}).get("containerConfig") or {}).get("env")
        ),
    }
    for place, names in places.items():
        problems += [f"{name} is not set on {place}" for name in sorted(required - names)]
    for place, secrets in {
        "the code server": _deployment(values).get("envSecrets"),
        "the runs": _launcher(values).get("envSecrets"),
    }.items():
        if ACCOUNT_KEYS_SECRET not in _names(secrets):
            problems.append(f"the Secret {ACCOUNT_KEYS_SECRET} is not in envSecrets of {place}")
    return problems


def test_every_variable_the_product_reads_is_set_on_the_code_server_and_the_runs() -> None:
    read, unresolved = environment_reads(ROOT, PRODUCT)
    unknown = {place for place in unresolved if tuple(place.split(":")) not in DYNAMIC_READS}
    assert not unknown, f"variables read under names the test cannot follow: {sorted(unknown)}"
    stale = {f"{m}:{f}" for m, f in DYNAMIC_READS} - unresolved
    assert not stale, f"DYNAMIC_READS names places that no longer read a variable: {stale}"
    assert not set(EXEMPT) - read, f"exempted but never read: {sorted(set(EXEMPT) - read)}"
    # The reader finds what the modules say they read.
    assert {"WAREHOUSE_ROOT", "WHITEBIT_ACCOUNTS_FILE", "WHITEBIT_NIGHTLY_CRON"} <= read
    assert missing_settings(_values(), read) == []


def test_a_new_variable_without_a_values_entry_fails(tmp_path: Path) -> None:
    package = tmp_path / "newpackage"
    package.mkdir()
    (package / "settings.py").write_text(
        'import os\nfrom typing import Final\nLIMIT_ENV: Final = "WHITEBIT_NEW_LIMIT"\n'
        'def limit(env):\n    return os.environ.get("WHITEBIT_NEW_FLAG"), env.get(LIMIT_ENV)\n'
        "def anything(name):\n    return os.getenv(name)\n",
        encoding="utf-8",
    )
    read, unresolved = environment_reads(tmp_path, ("newpackage",))
    assert read == {"WHITEBIT_NEW_LIMIT", "WHITEBIT_NEW_FLAG"}
    assert unresolved == {"newpackage.settings:anything"}
    problems = missing_settings(_values(), read)
    assert any("WHITEBIT_NEW_FLAG is not set on the runs" in p for p in problems)
    spoiled = copy.deepcopy(_values())
    spoiled["runLauncher"]["config"]["k8sRunLauncher"]["envSecrets"] = []
    assert any(ACCOUNT_KEYS_SECRET in p for p in missing_settings(spoiled, set()))


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
    example = yaml.safe_load((ROOT / "accounts.example.yaml").read_text(encoding="utf-8"))
    for account in example["accounts"]:
        for field in ("api_key_env", "api_secret_env"):
            assert f"{account[field]}=" in text, account[field]
