"""No secret value is in the Helm values: Secrets are named, never filled in.

The check returns what it finds wrong, and is also run on spoiled copies of the values, so that
it is seen to fail.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from tests.deploy.values import (
    deployment as _deployment,
)
from tests.deploy.values import (
    launcher as _launcher,
)
from tests.deploy.values import (
    load_values as _values,
)

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
    from assets.alerts import _SECRET_VARIABLES

    by_name = {entry["name"]: entry for entry in _env_entries(values)}
    for name in {*_SECRET_VARIABLES, "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} & set(by_name):
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
