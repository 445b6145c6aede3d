"""The Helm values are values the official Dagster chart accepts: checked against the chart's own
schema (`values.schema.json`, the one Helm checks values against on install), kept in
`tests/deploy/data/` with a note of where it comes from.

Two departures from what Helm does, both because the schema is applied here to this file alone:

- Helm checks the chart's defaults merged with these values, so the schema's ``required`` keys
  are always there; this file gives only what it changes, so ``required`` is not checked.
- The schema points the Kubernetes objects (a volume, an env entry, a security context) at
  definitions online; those references are left out, so such an object is checked as the
  chart's schema says around it (an object, a list of objects), not field by field.

Everything else holds: types, enums, and no key the chart does not know where the schema says
so (the run launcher's configuration, the run coordinator's, the concurrency settings...): a
misspelled key there is refused, where Helm would refuse the install.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

import jsonschema
import pytest
from jsonschema import Draft202012Validator, validators

from tests.deploy.values import ROOT, load_values

#: `helm/dagster/values.schema.json` of dagster-io/dagster at commit
#: 2bdb239558bfe98dc2a89e2e0c2f3f849367fdd4 (tests/deploy/data/README.md says why that one).
SCHEMA = ROOT / "tests" / "deploy" / "data" / "dagster-chart-values.schema.json"


def _local(node: Any) -> Any:
    """The schema without its references to definitions online."""
    if isinstance(node, Mapping):
        return {
            key: _local(value)
            for key, value in node.items()
            if not (key == "$ref" and not str(value).startswith("#"))
        }
    if isinstance(node, list):
        return [_local(value) for value in node]
    return node


def _no_required(*_: Any) -> Any:
    return iter(())


#: Draft 2020-12 (the schema's `$defs` are of it), ``required`` not checked (see above).
_Overrides = validators.extend(Draft202012Validator, {"required": _no_required})


def schema_problems(values: Mapping[str, Any]) -> list[str]:
    """What the chart's schema refuses in the values, each with the path of the value."""
    schema = _local(json.loads(SCHEMA.read_text(encoding="utf-8")))
    problems = []
    for error in _Overrides(schema).iter_errors(values):
        # Of a value that may be one thing or another (a mapping or null), the error of the
        # likelier branch, at the deepest path.
        best = jsonschema.exceptions.best_match([error])
        problems.append(f"{best.json_path}: {best.message}")
    return problems


def test_the_schema_is_the_charts() -> None:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    assert schema["title"] == "DagsterHelmValues"
    # The sections the values set are the chart's.
    assert set(load_values()) <= set(schema["properties"])


def test_the_chart_accepts_the_values() -> None:
    assert schema_problems(load_values()) == []


def _launcher(values: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = values["runLauncher"]["config"]["k8sRunLauncher"]
    return found


@pytest.mark.parametrize(
    ("spoil", "path", "says"),
    [
        # A misspelled field of the run launcher: the chart would render without it.
        (
            lambda v: _launcher(v).update(envSecret=_launcher(v).pop("envSecrets")),
            "$.runLauncher.config.k8sRunLauncher",
            "'envSecret' was unexpected",
        ),
        (
            lambda v: _launcher(v)["runK8sConfig"].update(jobSpec={"backoffLimit": 0}),
            "$.runLauncher.config.k8sRunLauncher.runK8sConfig",
            "'jobSpec' was unexpected",
        ),
        (
            lambda v: v["concurrency"]["runs"].update(maxConcurentRuns=4),
            "$.concurrency.runs",
            "'maxConcurentRuns' was unexpected",
        ),
        # Wrong types and names.
        (
            lambda v: v["dagster-user-deployments"]["deployments"][0].update(port="3030"),
            "$['dagster-user-deployments'].deployments[0].port",
            "is not of type 'integer'",
        ),
        (
            lambda v: v["dagsterDaemon"]["runRetries"].update(enabled="no"),
            "$.dagsterDaemon.runRetries.enabled",
            "is not of type 'boolean'",
        ),
        (
            lambda v: v["runLauncher"].update(type="K8sLauncher"),
            "$.runLauncher.type",
            "is not one of",
        ),
        (
            lambda v: v["computeLogManager"].update(type="NoopComputeLogManager"),
            "$.computeLogManager.type",
            "is not one of",
        ),
    ],
)
def test_values_the_chart_refuses_are_refused_naming_the_path(
    spoil: Any, path: str, says: str
) -> None:
    values = copy.deepcopy(load_values())
    spoil(values)
    problems = schema_problems(values)
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"{path}: "), problems
    assert says in problems[0], problems
