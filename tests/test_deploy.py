"""The Kubernetes deployment holds together, checked without a cluster and without the network.

- Every environment variable the product reads (found in the code of `assets`, `warehouse` and
  `pipeline`) is set in `deploy/helm/values.yaml`, on the code server and on the runs, or is
  exempted below with its reason: a new variable without an entry fails here.
- The values parse, and the `dagster.yaml` the chart renders from them (K8sRunLauncher, queued
  run coordinator, run monitoring, pools, PostgreSQL) is a valid instance: Dagster loads it, with
  a kubeconfig file that names no reachable cluster, and builds a run's Kubernetes Job from it.
- The Dockerfile syncs the lock without the dev group, serves the module `workspace.yaml` loads,
  and copies only paths that exist and that `.dockerignore` lets through.
- No secret value is in the values: Secrets are named, never filled in.

Each check returns what it finds wrong, and is also run on a spoiled copy of its input, so that
it is seen to fail.
"""

from __future__ import annotations

import ast
import copy
import fnmatch
import json
import re
import shlex
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
VALUES = ROOT / "deploy" / "helm" / "values.yaml"
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
DOCS = ROOT / "docs" / "many-machines.md"
PRODUCT = ("assets", "warehouse", "pipeline")
#: What `helm install whitebit-etl dagster/dagster -n whitebit-etl` names things.
RELEASE = NAMESPACE = "whitebit-etl"

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


def _values() -> dict[str, Any]:
    loaded = yaml.safe_load(VALUES.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def _deployment(values: Mapping[str, Any]) -> dict[str, Any]:
    deployments = values["dagster-user-deployments"]["deployments"]
    assert len(deployments) == 1, "one code location: assets.definitions"
    deployment: dict[str, Any] = deployments[0]
    return deployment


def _launcher(values: Mapping[str, Any]) -> dict[str, Any]:
    assert values["runLauncher"]["type"] == "K8sRunLauncher"
    launcher: dict[str, Any] = values["runLauncher"]["config"]["k8sRunLauncher"]
    return launcher


def _names(env: Any) -> set[str]:
    return {entry["name"] for entry in env or ()}


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


# --- (b) the instance the chart renders -----------------------------------------------------


def _snake(key: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()


def rendered_instance(values: Mapping[str, Any]) -> dict[str, Any]:
    """The `dagster.yaml` the chart (templates/configmap-instance.yaml and
    templates/helpers/instance/*.tpl) renders from these values, for the parts they use."""
    fullname = f"{RELEASE}-dagster"
    pg = values["postgresql"]
    assert pg["enabled"] is False, "an external PostgreSQL"
    postgres = {
        "postgres_db": {
            "username": pg["postgresqlUsername"],
            "password": {"env": "DAGSTER_PG_PASSWORD"},
            "hostname": pg["postgresqlHost"],
            "db_name": pg["postgresqlDatabase"],
            "port": pg["service"]["port"],
            "params": pg.get("postgresqlParams") or {},
        }
    }
    launcher = _launcher(values)
    config: dict[str, Any] = {
        "load_incluster_config": launcher["loadInclusterConfig"],
        "job_namespace": launcher.get("jobNamespace") or NAMESPACE,
        "service_account_name": fullname,
        "dagster_home": values["global"]["dagsterHome"],
        "instance_config_map": f"{fullname}-instance",
        "postgres_password_secret": values["global"]["postgresqlSecretName"],
    }
    if launcher.get("kubeconfigFile"):
        config["kubeconfig_file"] = launcher["kubeconfigFile"]
    for key in ("envConfigMaps", "envSecrets"):
        if launcher.get(key):
            config[_snake(key)] = [item["name"] for item in launcher[key]]
    for key in ("envVars", "volumeMounts", "volumes", "labels", "resources", "securityContext"):
        if launcher.get(key):
            config[_snake(key)] = launcher[key]
    if launcher.get("runK8sConfig"):
        config["run_k8s_config"] = {_snake(k): v for k, v in launcher["runK8sConfig"].items() if v}
    daemon = values["dagsterDaemon"]
    assert daemon["enabled"]
    assert daemon["runCoordinator"]["enabled"]
    assert daemon["runCoordinator"]["type"] == "QueuedRunCoordinator"
    queued = daemon["runCoordinator"]["config"]["queuedRunCoordinator"]
    concurrency = values.get("concurrency") or {}
    coordinator: dict[str, Any] = {}
    if not concurrency.get("enabled") or queued.get("maxConcurrentRuns") is not None:
        coordinator["max_concurrent_runs"] = queued.get("maxConcurrentRuns", -1)
    if queued.get("tagConcurrencyLimits"):
        coordinator["tag_concurrency_limits"] = queued["tagConcurrencyLimits"]
    for key in ("dequeueIntervalSeconds", "dequeueUseThreads", "dequeueNumWorkers"):
        if queued.get(key):
            coordinator[_snake(key)] = queued[key]
    if queued.get("blockOpConcurrencyLimitedRuns"):
        block = queued["blockOpConcurrencyLimitedRuns"]
        coordinator["block_op_concurrency_limited_runs"] = {
            "enabled": block["enabled"],
            "op_concurrency_slot_buffer": block["opConcurrencySlotBuffer"],
        }
    instance: dict[str, Any] = {
        "scheduler": {"module": "dagster.core.scheduler", "class": "DagsterDaemonScheduler"},
        "schedule_storage": {
            "module": "dagster_postgres.schedule_storage",
            "class": "PostgresScheduleStorage",
            "config": postgres,
        },
        "run_launcher": {"module": "dagster_k8s", "class": "K8sRunLauncher", "config": config},
        "run_storage": {
            "module": "dagster_postgres.run_storage",
            "class": "PostgresRunStorage",
            "config": postgres,
        },
        "event_log_storage": {
            "module": "dagster_postgres.event_log",
            "class": "PostgresEventLogStorage",
            "config": postgres,
        },
        "run_coordinator": {
            "module": "dagster.core.run_coordinator",
            "class": "QueuedRunCoordinator",
            **({"config": coordinator} if coordinator else {}),
        },
        "telemetry": {"enabled": values.get("telemetry", {}).get("enabled", True)},
    }
    assert values["computeLogManager"]["type"] == "NoOpComputeLogManager"
    instance["compute_logs"] = {
        "module": "dagster.core.storage.noop_compute_log_manager",
        "class": "NoOpComputeLogManager",
    }
    monitoring = daemon["runMonitoring"]
    if monitoring["enabled"]:
        instance["run_monitoring"] = {
            "enabled": True,
            "start_timeout_seconds": monitoring["startTimeoutSeconds"],
            "max_resume_run_attempts": monitoring["maxResumeRunAttempts"],
            "poll_interval_seconds": monitoring["pollIntervalSeconds"],
            "free_slots_after_run_end_seconds": monitoring["freeSlotsAfterRunEndSeconds"],
        }
    if concurrency.get("enabled"):
        pools = {_snake(k): v for k, v in concurrency.get("pools", {}).items() if v is not None}
        runs = {_snake(k): v for k, v in concurrency.get("runs", {}).items() if v}
        instance["concurrency"] = {
            **({"pools": pools} if pools else {}),
            **({"runs": runs} if runs else {}),
        }
    return instance


def instance_problems(instance: Mapping[str, Any], home: Path) -> list[str]:
    """What Dagster refuses in the instance's configuration: its schema and the conflicts between
    its sections, then each configured class's own schema."""
    from dagster import DagsterInvalidConfigError

    from assets.dagster_private import (
        ConfigurableClassData,
        class_from_code_pointer,
        dagster_instance_config,
        process_config,
    )

    home.mkdir(parents=True, exist_ok=True)
    (home / "dagster.yaml").write_text(yaml.safe_dump(dict(instance)), encoding="utf-8")
    try:
        dagster_instance_config(str(home))
    except DagsterInvalidConfigError as exc:
        return [str(exc)]
    problems = []
    for section, data in instance.items():
        if isinstance(data, Mapping) and "module" in data:
            # As the instance reads it (``dagster.core`` is spelled ``dagster._core`` now).
            where = ConfigurableClassData(data["module"], data["class"], "{}")
            configured = class_from_code_pointer(where.module_name, where.class_name)
            result = process_config(configured.config_type(), data.get("config") or {})
            if not result.success:
                problems += [f"{section}: {error.message}" for error in result.errors or ()]
    return problems


_KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters:
  - name: nowhere
    cluster: {server: "https://127.0.0.1:9"}
users:
  - name: nobody
    user: {token: not-a-token}
contexts:
  - name: nowhere
    context: {cluster: nowhere, user: nobody}
current-context: nowhere
"""


@pytest.fixture
def pg_password(monkeypatch: pytest.MonkeyPatch) -> None:
    # Resolved by the PostgreSQL storages' schema; no database is opened.
    monkeypatch.setenv("DAGSTER_PG_PASSWORD", "not-a-password")


@pytest.mark.usefixtures("pg_password")
def test_the_rendered_instance_is_valid(tmp_path: Path) -> None:
    instance = rendered_instance(_values())
    assert instance_problems(instance, tmp_path / "home") == []


@pytest.mark.usefixtures("pg_password")
def test_an_invalid_instance_is_refused(tmp_path: Path) -> None:
    values = _values()
    clash = copy.deepcopy(values)
    queued = clash["dagsterDaemon"]["runCoordinator"]["config"]["queuedRunCoordinator"]
    queued["blockOpConcurrencyLimitedRuns"] = {"enabled": False, "opConcurrencySlotBuffer": 0}
    assert instance_problems(rendered_instance(clash), tmp_path / "clash")
    unknown = copy.deepcopy(values)
    unknown["runLauncher"]["config"]["k8sRunLauncher"]["runK8sConfig"]["colour"] = {"a": 1}
    assert instance_problems(rendered_instance(unknown), tmp_path / "unknown")


def test_dagster_loads_the_instance_and_builds_a_run_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The instance with its K8sRunLauncher, queue, monitoring and pools, as Dagster loads it:
    storage in SQLite here (the PostgreSQL storages' configuration is checked above, but opening
    them would need the database), the launcher with a kubeconfig naming no reachable cluster."""
    import dagster as dg
    from dagster_k8s import K8sRunLauncher
    from dagster_k8s.container_context import K8sContainerContext
    from dagster_k8s.job import construct_dagster_k8s_job

    values = _values()
    instance = rendered_instance(values)
    for storage in ("run_storage", "event_log_storage", "schedule_storage"):
        del instance[storage]
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(_KUBECONFIG, encoding="utf-8")
    launcher_config = instance["run_launcher"]["config"]
    launcher_config.update(load_incluster_config=False, kubeconfig_file=str(kubeconfig))
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text(yaml.safe_dump(instance), encoding="utf-8")
    monkeypatch.setenv("DAGSTER_HOME", str(home))

    with dg.DagsterInstance.from_config(str(home)) as loaded:
        launcher = loaded.run_launcher
        assert isinstance(launcher, K8sRunLauncher)
        assert launcher.job_namespace == NAMESPACE
        assert set(launcher.env_secrets) == _names(_launcher(values)["envSecrets"])
        assert type(loaded.run_coordinator).__name__ == "QueuedRunCoordinator"
        assert loaded.run_monitoring_enabled
        assert loaded.run_monitoring_max_resume_run_attempts == 0
        assert loaded.run_monitoring_settings["free_slots_after_run_end_seconds"] > 0
        concurrency = loaded.get_concurrency_config()
        assert concurrency.pool_config.default_pool_limit == 1
        assert concurrency.run_queue_config is not None
        assert concurrency.run_queue_config.max_concurrent_runs == 4

        # The Job a run gets (what launch_run sends to the cluster), from the launcher alone.
        run = dg.DagsterRun(job_name="nightly")
        context = K8sContainerContext.create_for_run(run, launcher, include_run_tags=False)
        job = construct_dagster_k8s_job(
            job_config=context.get_k8s_job_config(
                job_image="registry.example.com/whitebit-etl:0.1.0", run_launcher=launcher
            ),
            args=["dagster", "api", "execute_run", "{}"],
            job_name="dagster-run-test",
            pod_name="dagster-run-test",
            component="run_worker",
            user_defined_k8s_config=context.run_k8s_config,
        )
    pod = job.spec.template.spec
    container = pod.containers[0]
    env = {e.name: e for e in container.env}
    read, _ = environment_reads(ROOT, PRODUCT)
    assert (read - set(EXEMPT)) | set(S3_VARIABLES) <= set(env) - {"DAGSTER_PG_PASSWORD"}
    assert env["DAGSTER_HOME"].value == values["global"]["dagsterHome"]
    assert env["AWS_SECRET_ACCESS_KEY"].value_from.secret_key_ref.name == "whitebit-aws"
    secrets = {source.secret_ref.name for source in container.env_from if source.secret_ref}
    assert ACCOUNT_KEYS_SECRET in secrets
    mounts = {m.mount_path: m.name for m in container.volume_mounts}
    accounts = Path(env["WHITEBIT_ACCOUNTS_FILE"].value)
    volumes = {v.name: v for v in pod.volumes}
    assert volumes[mounts[str(accounts.parent)]].config_map.name == "whitebit-accounts"
    assert pod.security_context.run_as_non_root is True
    assert job.spec.backoff_limit == 0


# --- (c) the Dockerfile ---------------------------------------------------------------------


def _instructions(text: str) -> list[tuple[str, str]]:
    joined = re.sub(r"\\\n", " ", text)
    lines = [line.strip() for line in joined.splitlines()]
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1] if " " in line else "")
        for line in lines
        if line and not line.startswith("#")
    ]


def _ignored(path: str, patterns: list[str]) -> bool:
    """Whether `.dockerignore` keeps ``path`` out of the build context (its last matching
    pattern decides; ``!`` lets a path back in)."""
    ignored = False
    parts = Path(path).parts
    for pattern in patterns:
        negated, bare = pattern.startswith("!"), pattern.lstrip("!").strip("/")
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        if any(fnmatch.fnmatch(prefix, bare) for prefix in prefixes):
            ignored = not negated
    return ignored


def dockerfile_problems(text: str, ignore: str, workspace: Mapping[str, Any]) -> list[str]:
    problems = []
    instructions = _instructions(text)
    patterns = [
        line.strip() for line in ignore.splitlines() if line.strip() and not line.startswith("#")
    ]
    syncs = [args for op, args in instructions if op == "RUN" and "uv sync" in args]
    if not syncs:
        problems.append("no `uv sync`")
    for args in syncs:
        if "--locked" not in args:
            problems.append(f"`uv sync` without --locked: {args}")
        if "--no-dev" not in args and "--no-default-groups" not in args:
            problems.append(f"`uv sync` would install the dev group: {args}")
        if re.search(r"--(all-groups|dev\b|group\s+dev|only-dev|only-group)", args):
            problems.append(f"`uv sync` asks for more groups: {args}")
    module = workspace["load_from"][0]["python_module"]["module_name"]
    commands = [json.loads(args) for op, args in instructions if op in ("CMD", "ENTRYPOINT")]
    command = [word for words in commands for word in words]
    if "-m" not in command or command[command.index("-m") + 1] != module:
        problems.append(f"the image does not serve {module}: {command}")
    users = [args.split(":")[0] for op, args in instructions if op == "USER"]
    if not users or users[-1] in ("root", "0"):
        problems.append("the image runs as root")
    copied: list[str] = []
    for op, args in instructions:
        if op != "COPY":
            continue
        words = [w for w in shlex.split(args) if not w.startswith("--")]
        if any(w.startswith("--from") for w in shlex.split(args)):
            continue
        copied += words[:-1]
    for source in copied:
        if not (ROOT / source).exists():
            problems.append(f"COPY {source}: no such path in the repository")
        elif _ignored(source, patterns):
            problems.append(f"COPY {source}: .dockerignore leaves it out of the build context")
    order = [args for op, args in instructions if op in ("COPY", "RUN")]
    lock = next((i for i, a in enumerate(order) if "uv.lock" in a), None)
    code = next((i for i, a in enumerate(order) if a.split()[0] in PRODUCT), None)
    if lock is None or code is None or lock > code:
        problems.append("the lock is not copied (and synced) before the code")
    return problems


def _workspace() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "workspace.yaml").read_text(encoding="utf-8"))
    return loaded


def test_the_dockerfile_builds_the_code_location_image() -> None:
    text = DOCKERFILE.read_text(encoding="utf-8")
    ignore = DOCKERIGNORE.read_text(encoding="utf-8")
    assert dockerfile_problems(text, ignore, _workspace()) == []
    # Every package of the product is in the image, and the chart serves the same module.
    copied = {args.split()[0] for op, args in _instructions(text) if op == "COPY"}
    assert set(PRODUCT) <= copied
    module = _workspace()["load_from"][0]["python_module"]["module_name"]
    deployment = _deployment(_values())
    args = deployment["dagsterApiGrpcArgs"]
    assert args[args.index("-m") + 1] == module
    command = json.loads(next(a for op, a in _instructions(text) if op == "CMD"))
    assert command[command.index("-p") + 1] == str(deployment["port"])


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (("--no-dev", ""), "would install the dev group"),
        (
            ("uv sync --locked --no-dev\n", "uv sync --locked --no-dev --all-groups\n"),
            "more groups",
        ),
        (("assets.definitions", "assets.other"), "does not serve"),
        (("USER 10001:10001", "USER root"), "runs as root"),
        (("COPY warehouse ./warehouse", "COPY warehouses ./warehouse"), "no such path"),
    ],
)
def test_a_spoiled_dockerfile_is_refused(change: tuple[str, str], expected: str) -> None:
    text = DOCKERFILE.read_text(encoding="utf-8")
    assert change[0] in text
    problems = dockerfile_problems(
        text.replace(*change), DOCKERIGNORE.read_text(encoding="utf-8"), _workspace()
    )
    assert any(expected in problem for problem in problems), problems


def test_a_copied_path_left_out_by_dockerignore_is_refused() -> None:
    text = DOCKERFILE.read_text(encoding="utf-8")
    ignore = DOCKERIGNORE.read_text(encoding="utf-8") + "\nassets\n"
    assert any("leaves it out" in p for p in dockerfile_problems(text, ignore, _workspace()))


# --- (d) no secret value ----------------------------------------------------------------------

#: A variable or key whose value would be a secret.
_SECRET_NAME = re.compile(r"KEY|SECRET|TOKEN|PASSWORD|PASSWD|WEBHOOK|CREDENTIAL", re.IGNORECASE)
#: Strings that are credentials whatever key holds them.
_SECRET_VALUE = re.compile(
    r"\b(AKIA|ASIA)[0-9A-Z]{16}\b"  # an AWS access key id
    r"|hooks\.slack\.com/services/"  # a Slack webhook
    r"|://[^/\s:@]+:[^/\s@]+@"  # a URL with a password in it
    r"|^[A-Za-z0-9+/_=-]{32,}$"  # a long token
)
#: Keys of the values whose value names a Secret (or a key of one), never holds it.
_NAMES_A_SECRET = {"postgresqlSecretName", "name", "key", "secretName"}


def _scalars(node: Any, path: str = "") -> Iterator[tuple[str, str, Any]]:
    """(path, key, value) of every scalar of the values."""
    if isinstance(node, Mapping):
        for key, value in node.items():
            if isinstance(value, Mapping | list):
                yield from _scalars(value, f"{path}.{key}")
            else:
                yield f"{path}.{key}", str(key), value
    elif isinstance(node, list):
        for index, value in enumerate(node):
            if isinstance(value, Mapping | list):
                yield from _scalars(value, f"{path}[{index}]")
            else:
                yield f"{path}[{index}]", "", value


def _env_entries(node: Any) -> Iterator[Mapping[str, Any]]:
    if isinstance(node, Mapping):
        if "name" in node and ("value" in node or "valueFrom" in node):
            yield node
        for value in node.values():
            yield from _env_entries(value)
    elif isinstance(node, list):
        for value in node:
            yield from _env_entries(value)


def secret_problems(values: Mapping[str, Any]) -> list[str]:
    problems = [
        f"{entry['name']} has a value: take it from a Secret (valueFrom)"
        for entry in _env_entries(values)
        if _SECRET_NAME.search(entry["name"]) and "value" in entry
    ]
    if values.get("generatePostgresqlPasswordSecret", True):
        problems.append("the chart would make the PostgreSQL Secret from a password in the values")
    for path, key, value in _scalars(values):
        if not isinstance(value, str) or not value:
            continue
        if _SECRET_NAME.search(key) and key not in _NAMES_A_SECRET:
            problems.append(f"{path} holds a value under a secret's key")
        if _SECRET_VALUE.search(value):
            problems.append(f"{path} looks like a credential")
        variable = value.split("=", 1)[0]
        if "=" in value and _SECRET_NAME.search(variable) and re.fullmatch(r"[A-Z_]+", variable):
            problems.append(f"{path} sets {variable} in the values")
    return problems


def test_no_secret_value_is_in_the_values() -> None:
    values = _values()
    assert secret_problems(values) == []
    # The secret variables the product knows are all taken from Secrets.
    from assets.alerts import _SECRET_ENVS

    by_name = {entry["name"]: entry for entry in _env_entries(values)}
    for name in {*_SECRET_ENVS, "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} & set(by_name):
        assert "secretKeyRef" in by_name[name]["valueFrom"], name


@pytest.mark.parametrize(
    "spoil",
    [
        lambda v: v.update(generatePostgresqlPasswordSecret=True),
        lambda v: v["postgresql"].update(postgresqlPassword="hunter2"),
        lambda v: _deployment(v)["env"].append(
            {"name": "WHITEBIT_MAIN_API_SECRET", "value": "hunter2"}
        ),
        lambda v: _deployment(v)["env"].append(
            {"name": "WAREHOUSE_ROOT", "value": "s3://AKIAABCDEFGHIJKLMNOP:x@bucket"}
        ),
        lambda v: _launcher(v).update(envVars=["AWS_SECRET_ACCESS_KEY=abc"]),
        lambda v: _deployment(v)["env"].append(
            {"name": "WHITEBIT_UI_URL", "value": "https://hooks.slack.com/services/T0/B0/x"}
        ),
    ],
)
def test_a_secret_value_in_the_values_is_refused(spoil: Any) -> None:
    values = _values()
    spoil(values)
    assert secret_problems(values)
