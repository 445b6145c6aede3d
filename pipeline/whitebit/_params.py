"""What the client refuses before any request: a base URL that would send signed requests in
the clear, and parameters the spec's rules would refuse."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any

import httpx

from pipeline import spec

_LOOPBACK_NAMES = frozenset({"localhost"})


def checked_base_url(base_url: str) -> httpx.URL:
    """The exchange's address, refusing plain ``http://`` anywhere but loopback, and an address
    carrying user info (what comes before '@' may be a credential: it is never echoed)."""
    try:
        url = httpx.URL(base_url)
    except httpx.InvalidURL:
        raise ValueError("base URL: not a URL") from None
    shown = str(url.copy_with(username=None, password=None)) if url.userinfo else base_url
    if url.userinfo:
        raise ValueError(
            f"base URL {shown} carries user info before '@': the key and secret go in their "
            "variables, never in the address"
        )
    host = url.host
    if not host:
        raise ValueError(f"base URL {shown!r} names no host")
    if url.scheme == "https":
        return url
    if url.scheme != "http":
        raise ValueError(f"base URL {shown!r}: only https:// (or http:// on loopback)")
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host.lower() in _LOOPBACK_NAMES
    if not loopback:
        raise ValueError(
            f"refusing plain http:// to {host}: signed requests would cross the network "
            "unencrypted; use https:// (http:// is accepted for loopback addresses only)"
        )
    return url


def _broken_rule(rule: spec.Param, value: Any) -> str | None:
    """What is wrong with ``value`` under the spec's rule, if anything."""
    if rule.kind is int and type(value) is not int:
        return "must be an integer"
    if rule.kind is str and type(value) is not str:
        return "must be a string"
    if rule.minimum is not None and value < rule.minimum:
        return f"must be at least {rule.minimum}"
    if rule.maximum is not None and value > rule.maximum:
        return f"must be at most {rule.maximum}"
    if rule.choices is not None and value not in rule.choices:
        return f"must be one of {list(rule.choices)}"
    if rule.text_choices is not None and (value.upper() if rule.fold_case else value) not in (
        rule.text_choices
    ):
        return f"must be one of {', '.join(rule.text_choices)}"
    if rule.max_length is not None and len(value) > rule.max_length:
        return f"must be at most {rule.max_length} characters"
    if rule.pattern is not None and not rule.pattern.match(value):
        return f"must match {rule.pattern.pattern}"
    return None


def check_params(operation: spec.Operation, params: Mapping[str, Any]) -> None:
    """Refuse, before any request, a parameter the spec's rules would refuse."""
    for rule in operation.params:
        if rule.required and rule.name not in params:
            raise ValueError(f"{operation.name}: {rule.name} is required")
    for name, value in params.items():
        known = operation.params_by_name.get(name)
        problem = "is not a parameter of it" if known is None else _broken_rule(known, value)
        if problem:
            raise ValueError(f"{operation.name}: {name} {problem}, not {value!r}")
