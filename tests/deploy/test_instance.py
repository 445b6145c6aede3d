"""The instance files the product ships are instances Dagster accepts.

`assets/dagster.yaml` (the instance of the CLI, `make ui` and `whitebit-etl serve`) and
`deploy/celery/dagster.yaml` (the same with PostgreSQL and the Celery launcher, for several
machines) pass Dagster's own check of an instance's configuration (its schema and the conflicts
between its sections), and each class they configure accepts its configuration. Spoiled copies
are refused, so that the check is seen to fail.

The shipped instance is the one source of the settings every deployment shares (run monitoring:
its poll interval, start and cancel timeouts, slot release and run time limit; the run queue and
the pools; telemetry): the Celery instance has its sections as they are, and the Helm values
have them in the chart's spelling (``run_monitoring.poll_interval_seconds`` is
``dagsterDaemon.runMonitoring.pollIntervalSeconds``). A difference fails here unless it is in
`DIFFERENCES`, with its reason.

(The Kubernetes instance is the chart's to render from `deploy/helm/values.yaml`;
`test_chart.py` checks those values against the chart's schema.)
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.values import ROOT, load_values

#: The instance every machine of the product starts from, and the one of several machines.
SHIPPED = ROOT / "assets" / "dagster.yaml"
CELERY = ROOT / "deploy" / "celery" / "dagster.yaml"


def load_instance(path: Path) -> dict[str, Any]:
    loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


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
            configured: Any = class_from_code_pointer(where.module_name, where.class_name)
            result = process_config(configured.config_type(), data.get("config") or {})
            if not result.success:
                problems += [f"{section}: {error.message}" for error in result.errors or ()]
    return problems


@pytest.fixture
def variables(monkeypatch: pytest.MonkeyPatch) -> None:
    # What the Celery instance reads from the environment; nothing is opened.
    monkeypatch.setenv("DAGSTER_POSTGRES_URL", "postgresql+psycopg2://u@127.0.0.1:9/dagster")
    monkeypatch.setenv("CELERY_BROKER_URL", "redis://127.0.0.1:9/0")
    monkeypatch.setenv("CELERY_RESULT_BACKEND", "redis://127.0.0.1:9/1")


@pytest.mark.usefixtures("variables")
@pytest.mark.parametrize("path", [SHIPPED, CELERY], ids=["shipped", "celery"])
def test_dagster_accepts_the_instance(path: Path, tmp_path: Path) -> None:
    assert instance_problems(load_instance(path), tmp_path / "home") == []


def _clash(instance: dict[str, Any]) -> None:
    # Both the run queue's limit and the coordinator's: Dagster refuses the pair.
    instance["run_coordinator"] = {
        "module": "dagster.core.run_coordinator",
        "class": "QueuedRunCoordinator",
        "config": {"max_concurrent_runs": 2},
    }


@pytest.mark.usefixtures("variables")
@pytest.mark.parametrize(
    ("path", "spoil", "says"),
    [
        (
            SHIPPED,
            lambda i: i["run_monitoring"].update(max_runtime_second=60),
            "max_runtime_second",
        ),
        (
            SHIPPED,
            lambda i: i["run_monitoring"].update(poll_interval_seconds="15"),
            "poll_interval_seconds",
        ),
        (SHIPPED, _clash, "max_concurrent_runs"),
        (CELERY, lambda i: i["run_launcher"]["config"].update(brokers="x"), "brokers"),
    ],
    ids=["unknown-key", "wrong-type", "clash", "launcher-config"],
)
def test_an_instance_dagster_refuses_is_refused(
    path: Path, spoil: Any, says: str, tmp_path: Path
) -> None:
    instance = copy.deepcopy(load_instance(path))
    spoil(instance)
    problems = instance_problems(instance, tmp_path / "home")
    assert any(says in problem for problem in problems), problems


# --- One instance configuration ----------------------------------------------------------------

#: Where the chart's values hold each section of the shipped instance.
CHART_SECTIONS: Mapping[str, str] = {
    "run_monitoring": "dagsterDaemon.runMonitoring",
    "run_retries": "dagsterDaemon.runRetries",
    "concurrency": "concurrency",
    "telemetry": "telemetry",
}
#: Every difference allowed between the shipped instance and the two others, by where it is
#: (``celery:<key>`` in the Celery instance, ``chart:<path>`` in the Helm values), with its reason.
DIFFERENCES: Mapping[str, str] = {
    "celery:storage": "several machines share one PostgreSQL; the shipped instance is SQLite "
    "until DAGSTER_POSTGRES_URL is set",
    "celery:run_launcher": "runs on the Celery workers; the shipped instance runs them as "
    "processes of the machine",
    "chart:concurrency.enabled": "the chart writes the concurrency section only when it is "
    "enabled; an instance file has it by having it",
}


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(word.capitalize() for word in rest)


def _at(tree: Mapping[str, Any], path: str) -> Any:
    for part in path.split("."):
        tree = tree[part]
    return tree


def _leaves(tree: Any, path: str) -> Iterator[tuple[str, Any]]:
    if isinstance(tree, Mapping) and tree:
        for key, value in tree.items():
            yield from _leaves(value, f"{path}.{key}" if path else str(key))
    else:
        yield path, tree


def instance_differences(
    shipped: Mapping[str, Any], celery: Mapping[str, Any], values: Mapping[str, Any]
) -> set[str]:
    """Where the Celery instance and the Helm values part from the shipped instance, on what the
    shipped instance sets (and what they set beside it in the same sections)."""
    found = {f"celery:{key}" for key in set(celery) ^ set(shipped)}
    found |= {f"celery:{key}" for key in set(celery) & set(shipped) if celery[key] != shipped[key]}
    unmapped = set(shipped) - set(CHART_SECTIONS)
    assert not unmapped, f"sections of the shipped instance with no place in the chart: {unmapped}"
    for section, place in CHART_SECTIONS.items():
        ours = dict(_leaves(shipped.get(section, {}), ""))
        chart = dict(_leaves(_at(values, place), ""))
        spelled = {re.sub(r"[^.]+", lambda m: _camel(m.group()), key): v for key, v in ours.items()}
        found |= {
            f"chart:{place}.{key}"
            for key in set(spelled) | set(chart)
            if spelled.get(key, "<unset>") != chart.get(key, "<unset>")
        }
    return found


def test_the_three_instances_agree_but_for_the_listed_differences() -> None:
    found = instance_differences(load_instance(SHIPPED), load_instance(CELERY), load_values())
    assert found - set(DIFFERENCES) == set(), "differences with no reason in DIFFERENCES"
    assert set(DIFFERENCES) - found == set(), "DIFFERENCES lists what no longer differs"


@pytest.mark.parametrize(
    ("spoil", "found"),
    [
        (
            lambda s, c, v: v["dagsterDaemon"]["runMonitoring"].update(pollIntervalSeconds=30),
            "chart:dagsterDaemon.runMonitoring.pollIntervalSeconds",
        ),
        (
            lambda s, c, v: v["dagsterDaemon"]["runMonitoring"].pop("maxRuntimeSeconds"),
            "chart:dagsterDaemon.runMonitoring.maxRuntimeSeconds",
        ),
        (
            lambda s, c, v: s["run_monitoring"].update(free_slots_after_run_end_seconds=60),
            "chart:dagsterDaemon.runMonitoring.freeSlotsAfterRunEndSeconds",
        ),
        (
            lambda s, c, v: c["run_monitoring"].update(start_timeout_seconds=300),
            "celery:run_monitoring",
        ),
        (
            lambda s, c, v: v["concurrency"]["pools"].update(defaultLimit=2),
            "chart:concurrency.pools.defaultLimit",
        ),
    ],
    ids=["chart-poll", "chart-no-limit", "shipped-slots", "celery-start", "chart-pools"],
)
def test_an_instance_that_parts_from_the_shipped_one_is_found(spoil: Any, found: str) -> None:
    shipped, celery = load_instance(SHIPPED), load_instance(CELERY)
    values = copy.deepcopy(load_values())
    spoil(shipped, celery, values)
    assert found in instance_differences(shipped, celery, values) - set(DIFFERENCES)
