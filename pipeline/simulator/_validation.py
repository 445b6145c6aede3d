"""Parameter validation, driven by the rules of `pipeline.spec`.

Every failing field is reported at once, keyed by its name, in the words of the service family
the operation belongs to (`spec.Wording`): the main account's Laravel service ("The limit must be
an integer."), the trade engine ("Limit field should be an integer."), or the convert service's
translation keys ("validation.numeric_integer"). Whether a value names something that exists is
asked of the caller, which holds the data. Then ``offset + limit`` against the operation's reach,
and its time window against the clock (`_windows`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from pipeline.spec import Operation, Param, ValidationAnswer

from ._answers import Answer, json_answer, private_error
from ._windows import check_window

#: Body fields that are part of signing, not parameters.
SIGNING_FIELDS = frozenset({"request", "nonce", "nonceWindow"})

Exists = Callable[[Param, Any], bool]


class Invalid(Exception):
    def __init__(self, answer: Answer) -> None:
        super().__init__(answer.body.decode())
        self.answer = answer


def refused(how: ValidationAnswer, errors: Mapping[str, list[str]]) -> Invalid:
    """The refusal of parameters, each failing field to its messages, as ``how`` answers it."""
    if how.wrapped:
        return Invalid(
            json_answer(how.status, {"success": False, "message": errors, "result": None})
        )
    return Invalid(private_error(how.status, how.code, how.message, errors))


def _words(name: str) -> str:
    """A field's name as Laravel writes it in a message: ``transactionMethod`` is
    "transaction method"."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r" \1", name).lower()


def _title(name: str) -> str:
    """A field's name as the trade engine writes it: ``orderId`` is "OrderId"."""
    return name[:1].upper() + name[1:]


#: What each wording says when a rule is broken: (kind of break, parameter, bound) -> message.
_MESSAGES: dict[str, Callable[[str, Param, Any], str]] = {
    "laravel": lambda what, p, n: {
        "required": "validation.required",
        "integer": f"The {_words(p.name)} must be an integer.",
        "string": f"The {_words(p.name)} must be a string.",
        "array": f"The {_words(p.name)} must be an array.",
        "min": f"The {_words(p.name)} must be at least {n}.",
        "max": f"The {_words(p.name)} may not be greater than {n}.",
        "length": f"The {_words(p.name)} may not be greater than {n} characters.",
        "items": f"The {_words(p.name)} may not have more than {n} items.",
        "format": f"The {_words(p.name)} format is invalid.",
        "choice": f"The selected {_words(p.name)} is invalid.",
        "unknown": f"The selected {_words(p.name)} is invalid.",
    }[what],
    "engine": lambda what, p, n: {
        "required": f"{_title(p.name)} field is required.",
        "integer": f"{_title(p.name)} field should be an integer.",
        "string": f"{_title(p.name)} field should be a string.",
        "array": f"{_title(p.name)} field should be an array.",
        "min": f"{_title(p.name)} should be at least {n}.",
        "max": f"{_title(p.name)} should not be greater than {n}.",
        "length": f"{_title(p.name)} should not be longer than {n} characters.",
        "items": f"{_title(p.name)} should not have more than {n} items.",
        "format": f"{_title(p.name)} field format is invalid.",
        "choice": f"{_title(p.name)} field is invalid.",
        "unknown": f"{_title(p.name)} is not available",
    }[what],
    # A bounded number out of its range is a "field length" error, a negative offset a
    # "length min" one (the convert service's documented answers).
    "keys": lambda what, p, n: {
        "required": "validation.required",
        "integer": "validation.numeric_integer",
        "string": "validation.string",
        "array": "validation.array",
        "min": "validation.length_min" if p.maximum is None else "validation.numeric_field_length",
        "max": "validation.numeric_field_length",
        "length": "validation.max_length",
        "items": "validation.max_items",
        "format": f"{p.name} is invalid.",
        "choice": f"{p.name} is invalid.",
        "unknown": f"{p.name} is invalid.",
    }[what],
    # The public v1 API (the kline): the documented "Market is not available." for a market
    # that names none, malformed or unknown; the other messages in the same form.
    "v1": lambda what, p, n: {
        "required": f"{_title(p.name)} field is required.",
        "integer": f"{_title(p.name)} field must be an integer.",
        "string": f"{_title(p.name)} field must be a string.",
        "array": f"{_title(p.name)} field must be an array.",
        "min": f"{_title(p.name)} field must be at least {n}.",
        "max": f"{_title(p.name)} field must not be greater than {n}.",
        "length": f"{_title(p.name)} field must not be longer than {n} characters.",
        "items": f"{_title(p.name)} field must not have more than {n} items.",
        "format": f"{_title(p.name)} is not available.",
        "choice": f"{_title(p.name)} field is invalid.",
        "unknown": f"{_title(p.name)} is not available.",
    }[what],
}

#: ``offset + limit`` over the operation's reach: the one message the docs give for it.
REACH = "Offset is too big. Please use offset + limit less than {reach}."


def _integer(p: Param, value: Any) -> int | None:
    """The integer ``value`` stands for under the rule, if any (booleans are not integers)."""
    if type(value) is int:
        return value
    if p.numeric_text and type(value) is str and value.isascii() and value.isdigit():
        return int(value)
    return None


def _checked(p: Param, value: Any) -> tuple[str, Any] | tuple[None, Any]:
    """(the rule ``value`` breaks, its bound) or (None, the value taken), existence aside."""
    if p.kind is int:
        number = _integer(p, value)
        if number is None:
            return "integer", None
        if p.minimum is not None and number < p.minimum:
            return "min", p.minimum
        if p.maximum is not None and number > p.maximum:
            return "max", p.maximum
        if p.choices is not None and number not in p.choices:
            return "choice", None
        return None, number
    if p.kind is list:
        if type(value) is not list:
            return "array", None
        if p.max_items is not None and len(value) > p.max_items:
            return "items", p.max_items
        taken = []
        for item in value:
            broken, item_value = _checked(p.items, item) if p.items else (None, item)
            if broken is not None:
                return broken, item_value
            taken.append(item_value)
        return None, taken
    if type(value) is not str:
        return "string", None
    if p.max_length is not None and len(value) > p.max_length:
        return "length", p.max_length
    if p.text_choices is not None:
        fold = value.upper() if p.fold_case else value
        if fold not in p.text_choices:
            return "choice", None
        return None, fold
    return None, value


def validate(
    op: Operation, body: Mapping[str, Any], exists: Exists, now: float = 0.0
) -> dict[str, Any]:
    """The operation's parameters with defaults applied, or `Invalid` with the exchange's answer.

    Unknown body fields are ignored, as the exchange ignores them. With a time window, its ends
    are resolved against ``now`` (defaults, clamps) and checked (`_windows.check_window`).
    """
    say = _MESSAGES[op.validation.wording]
    params: dict[str, Any] = {}
    errors: dict[str, list[str]] = {}
    unknown: dict[str, list[str]] = {}
    for p in op.params:
        if p.name not in body:
            if p.required:
                errors[p.name] = [say("required", p, None)]
            else:
                params[p.name] = p.default
            continue
        value = body[p.name]
        broken, taken = _checked(p, value)
        if broken is not None:
            # A value that must name something fails as an unknown one would, whatever broke.
            target = unknown if p.must_exist and op.unknown_value is not None else errors
            target[p.name] = [say(broken, p, taken)]
        elif p.pattern is not None and not p.pattern.match(taken):
            # A malformed value can name nothing that exists: same answer as an unknown one.
            target = unknown if op.unknown_value is not None else errors
            target[p.name] = [say("format", p, None)]
        elif p.must_exist and not exists(p, taken):
            target = unknown if op.unknown_value is not None else errors
            target[p.name] = [say("unknown", p, None)]
        else:
            params[p.name] = taken
    if errors:
        raise refused(op.validation, errors)
    if unknown and op.unknown_value is not None:
        raise refused(op.unknown_value, unknown)
    if op.max_reach is not None and params["offset"] + params["limit"] > op.max_reach:
        errors["offset"] = [REACH.format(reach=op.max_reach)]
    elif op.window is not None:
        errors.update(check_window(op.window, op.validation.wording, params, now))
    if errors:
        raise refused(op.validation, errors)
    return params
