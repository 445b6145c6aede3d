"""Parameter validation, driven by the rules of `pipeline.spec`.

Messages are the exchange's (a Laravel service): every failing field is reported at once, keyed by
its name. Whether a value names something that exists is asked of the caller, which holds the data.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pipeline.spec import Operation, Param

from ._answers import Answer, private_error

#: Body fields that are part of signing, not parameters.
SIGNING_FIELDS = frozenset({"request", "nonce", "nonceWindow"})

Exists = Callable[[Param, Any], bool]


class Invalid(Exception):
    def __init__(self, answer: Answer) -> None:
        super().__init__(answer.body.decode())
        self.answer = answer


def _rule_error(p: Param, value: Any) -> str | None:
    """The message for the first rule ``value`` breaks, apart from existence."""
    if p.kind is int:
        if type(value) is not int:
            return f"The {p.name} must be an integer."
        if p.minimum is not None and value < p.minimum:
            return f"The {p.name} must be at least {p.minimum}."
        if p.maximum is not None and value > p.maximum:
            return f"The {p.name} may not be greater than {p.maximum}."
        if p.choices is not None and value not in p.choices:
            return f"The selected {p.name} is invalid."
        return None
    if type(value) is not str:
        return f"The {p.name} must be a string."
    if p.max_length is not None and len(value) > p.max_length:
        return f"The {p.name} may not be greater than {p.max_length} characters."
    return None


def validate(op: Operation, body: Mapping[str, Any], exists: Exists) -> dict[str, Any]:
    """The operation's parameters with defaults applied, or `Invalid` with the exchange's answer.

    Unknown body fields are ignored, as the exchange ignores them.
    """
    params: dict[str, Any] = {}
    errors: dict[str, list[str]] = {}
    unknown: dict[str, list[str]] = {}
    for p in op.params:
        if p.name not in body:
            if p.required:
                errors[p.name] = ["validation.required"]
            else:
                params[p.name] = p.default
            continue
        value = body[p.name]
        message = _rule_error(p, value)
        if message is not None:
            errors[p.name] = [message]
        elif p.pattern is not None and not p.pattern.match(value):
            # A malformed value can name nothing that exists: same answer as an unknown one.
            target = unknown if op.unknown_value is not None else errors
            target[p.name] = [f"The {p.name} format is invalid."]
        elif p.must_exist and not exists(p, value):
            target = unknown if op.unknown_value is not None else errors
            target[p.name] = [f"The selected {p.name} is invalid."]
        else:
            params[p.name] = value
    if errors:
        raise Invalid(
            private_error(op.validation.status, op.validation.code, "Validation failed", errors)
        )
    if unknown and op.unknown_value is not None:
        answer = op.unknown_value
        raise Invalid(private_error(answer.status, answer.code, answer.message, unknown))
    return params
