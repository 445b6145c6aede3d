"""The instance the chart renders from the values is one Dagster accepts.

The `dagster.yaml` the chart renders from them (K8sRunLauncher, queued run coordinator, run
monitoring, pools, PostgreSQL) is a valid instance: Dagster loads it, with a kubeconfig file
that names no reachable cluster, and builds a run's Kubernetes Job from it.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.test_variables import (
    ACCOUNT_KEYS_SECRET,
    EXEMPT,
    PRODUCT,
    S3_VARIABLES,
    environment_reads,
)
from tests.deploy.values import ROOT
from tests.deploy.values import launcher as _launcher
from tests.deploy.values import load_values as _values
from tests.deploy.values import names as _names

#: What `helm install whitebit-etl dagster/dagster -n whitebit-etl` names things.
RELEASE = NAMESPACE = "whitebit-etl"

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
