"""Serving the simulator: in-process for tests (a uvicorn server on a thread), or as a process.

`Simulator` is the handle tests hold: its URL and credentials, and the switches they steer
(faults, tampers, clock, rate budgets, page cap). The same switches are reachable over HTTP under
``/_simulator/`` for a simulator running in another process (`spawn`).

One simulator stands for one base URL: the global service or the EU one (``region``), each with
its own keys, data and per-address budgets, as the two real services have. It serves the main
account and its sub-accounts at once, each key answered from its own account's data.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import re
import shlex
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self

import orjson
import uvicorn
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from pipeline.spec import SimClock

from ._accounts import Accounts
from ._answers import Spelling, page_cap_of, spelling_of
from ._app import CONTROL_PREFIX, DroppedConnection, SimulatorState, build_app
from ._data import Dataset, Scale
from ._faults import Fault, named_tamper
from ._keys import DEFAULT_SUBACCOUNTS, Credentials, KeyStore, check_region, subaccount_role
from ._latency import Latency

DEFAULT_SEED = 7


class _HideDroppedConnections(logging.Filter):
    """A dropped connection is a fault we inject on purpose, not an error of the server."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, DroppedConnection)


def _control_routes(state: SimulatorState) -> list[Route]:
    async def faults(request: Request) -> Response:
        body = orjson.loads(await request.body() or b"{}")
        kinds = [Fault(k) for k in body.get("kinds", [f.value for f in Fault])]
        if "script" in body:
            state.faults.script(Fault(k) if k else None for k in body["script"])
        else:
            state.faults.set(
                float(body.get("probability", 0.0)),
                kinds,
                seed=int(body.get("seed", 0)),
                slow_seconds=body.get("slow_seconds"),
            )
        return Response(b"{}", media_type="application/json")

    async def tamper(request: Request) -> Response:
        body = orjson.loads(await request.body() or b"{}")
        state.faults.tamper(str(body["path"]), named_tamper(body))
        return Response(b"{}", media_type="application/json")

    async def clock(request: Request) -> Response:
        body = orjson.loads(await request.body() or b"{}")
        now = state.accounts.clock.advance(float(body.get("advance", 0)))
        return Response(orjson.dumps({"now": now}), media_type="application/json")

    async def limits(request: Request) -> Response:
        body = orjson.loads(await request.body() or b"{}")
        if "enabled" in body:
            state.limits.enabled = bool(body["enabled"])
        for group, (requests, period) in body.get("budgets", {}).items():
            state.limits.set_budget(group, int(requests), float(period))
        if "page_cap" in body:
            state.page_cap = page_cap_of(body["page_cap"])
        if "spelling" in body:
            state.spelling = spelling_of(body["spelling"])
        return Response(b"{}", media_type="application/json")

    async def latency(request: Request) -> Response:
        body = orjson.loads(await request.body() or b"{}")
        state.round_trips.latency = Latency(
            float(body.get("round_trip_s", 0)), float(body.get("jitter_s", 0))
        )
        return Response(b"{}", media_type="application/json")

    async def stats(request: Request) -> Response:
        if request.method == "DELETE":
            state.reset_counts()
        return Response(
            orjson.dumps(
                {
                    "answered": {f"{p} {s}": n for (p, s), n in state.answered.items()},
                    "spans": {p: last - first for p, (first, last) in state.spans.items()},
                    # Monotonic seconds, one clock for the machine's processes (CLOCK_MONOTONIC).
                    "first_last": state.spans,
                    "rate_limited": state.limits.rejected,
                    "faults": {f.value: n for f, n in state.faults.injected.items()},
                }
            ),
            media_type="application/json",
        )

    return [
        Route(f"{CONTROL_PREFIX}/faults", faults, methods=["POST"]),
        Route(f"{CONTROL_PREFIX}/tamper", tamper, methods=["POST"]),
        Route(f"{CONTROL_PREFIX}/clock", clock, methods=["POST"]),
        Route(f"{CONTROL_PREFIX}/limits", limits, methods=["POST"]),
        Route(f"{CONTROL_PREFIX}/latency", latency, methods=["POST"]),
        Route(f"{CONTROL_PREFIX}/stats", stats, methods=["GET", "DELETE"]),
    ]


class Simulator:
    """The simulated exchange, served on loopback from a background thread.

    >>> with Simulator(seed=7, subaccounts=4, region="eu") as sim:
    ...     sim.url, sim.credentials.api_key, sim.credentials_for("sub_4")
    """

    def __init__(
        self,
        *,
        seed: int = DEFAULT_SEED,
        scale: Scale | None = None,
        clock: SimClock | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        rate_limits: bool = True,
        page_cap: int | None = None,
        subaccounts: int = DEFAULT_SUBACCOUNTS,
        region: str = "global",
        spelling: Spelling = "camel",
        latency: Latency | None = None,
        accounts: Accounts | None = None,
    ) -> None:
        self.region = check_region(region)
        self.keys = KeyStore(seed, subaccounts=subaccounts, region=region)
        #: The data served: built here, or given (`frozen_accounts`), its clock the simulator's.
        self.accounts = accounts or Accounts(
            seed,
            scale or Scale.small(),
            clock or SimClock(),
            region=region,
            names=self.keys.accounts,
        )
        if self.accounts.names != tuple(self.keys.accounts):
            raise ValueError("the accounts given are not those of the simulator's keys")
        self.clock = self.accounts.clock
        #: The main account's data (`dataset_for` gives any key's account's).
        self.dataset = self.accounts.main.dataset
        self.state = SimulatorState(self.accounts, self.keys)
        self.state.limits.enabled = rate_limits
        self.page_cap = page_cap
        self.spelling = spelling
        self.latency = latency or Latency()
        self.app = build_app(self.state, _control_routes(self.state))
        self._host, self._port = host, port
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None

    # -- what tests read and steer --
    @property
    def faults(self) -> Any:
        return self.state.faults

    @property
    def limits(self) -> Any:
        return self.state.limits

    @property
    def page_cap(self) -> int | None:
        """Most records a paged answer holds (its ``limit`` then says so); None: as asked."""
        return self.state.page_cap

    @page_cap.setter
    def page_cap(self, value: int | None) -> None:
        self.state.page_cap = page_cap_of(value)

    @property
    def spelling(self) -> Spelling:
        """How records name a field the documentation names two ways (`_answers.Spelling`)."""
        return self.state.spelling

    @spelling.setter
    def spelling(self, value: Spelling) -> None:
        self.state.spelling = spelling_of(value)

    @property
    def latency(self) -> Latency:
        """How far the exchange is: each answer's round trip (`Latency`; none by default)."""
        return self.state.round_trips.latency

    @latency.setter
    def latency(self, value: Latency) -> None:
        self.state.round_trips.latency = value

    @property
    def credentials(self) -> Credentials:
        """The demo key: a B2B partner with every permission."""
        return self.keys["partner"].credentials

    def credentials_for(self, role: str) -> Credentials:
        """Credentials of another key: ``no_b2b``, ``read_only``, ``disabled``, ``sub_1``..."""
        return self.keys[role].credentials

    @property
    def roles(self) -> list[str]:
        """Every key's role: the main account's first, then ``sub_1`` .. ``sub_N``."""
        return self.keys.roles

    @property
    def subaccount_roles(self) -> list[str]:
        """The roles of the sub-accounts' keys, ``sub_1`` .. ``sub_N``."""
        return [role for role in self.keys.roles if self.keys[role].subaccount]

    def dataset_for(self, role: str) -> Dataset:
        """The data of the account the key of that role acts for (built now if not yet)."""
        return self.accounts[self.keys[role].account].dataset

    @property
    def url(self) -> str:
        if self._socket is None:
            raise RuntimeError("the simulator is not started")
        host, port = self._socket.getsockname()[:2]
        return f"http://{host}:{port}"

    # -- serving --
    def start(self) -> Self:
        family = socket.AF_INET6 if ":" in self._host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self._host, self._port))
        self._socket = sock
        config = uvicorn.Config(
            self.app,
            log_level="warning",
            access_log=False,
            lifespan="off",
            http="httptools",
            loop="uvloop",
            backlog=1024,
            timeout_keep_alive=30,
            # The app dates every answer by its data clock (`_app.ExchangeDate`): one Date only.
            date_header=False,
        )
        logging.getLogger("uvicorn.error").addFilter(_HideDroppedConnections())
        self._server = _Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name="simulator", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 15
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the simulator did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._socket is not None:
            self._socket.close()
        self._server = self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class _Server(uvicorn.Server):
    """uvicorn's server, stopped at once: an embedded simulator is started and stopped for each
    step of a run, and uvicorn's own stop waits for its loop's next 0.1 s tick and another 0.1 s
    before it closes. Answers still in flight when it stops are dropped (their clients are gone:
    a step stops its simulator once its walks have ended, or on an error)."""

    _stopped: asyncio.Event | None = None
    _loop: asyncio.AbstractEventLoop | None = None

    async def main_loop(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopped = asyncio.Event()
        if not self.should_exit:
            await self._stopped.wait()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        for connection in list(self.server_state.connections):
            connection.shutdown()

    def stop(self) -> None:
        """From another thread: end the loop now (or as soon as it runs)."""
        self.should_exit = True
        if self._loop is not None and self._stopped is not None:
            with contextlib.suppress(RuntimeError):  # the loop has ended already
                self._loop.call_soon_threadsafe(self._stopped.set)


@functools.lru_cache(maxsize=2)
def frozen_accounts(seed: int, region: str, subaccounts: int, at: float) -> Accounts:
    """The accounts of a simulator of the small scale whose clock stands still at ``at``, built
    once per process: the data is the same for every such simulator (drawn from the seed, the
    clock never moving), so simulators started one after another at the same moment (the steps of
    a run) share it instead of making their ledgers again. Two moments are kept (a day's and the
    day's before)."""
    names = KeyStore(seed, subaccounts=subaccounts, region=region).accounts
    return Accounts(seed, Scale.small(), SimClock(at), region=region, names=names)


def serve(
    *,
    host: str,
    port: int,
    seed: int,
    scale: Scale,
    frozen_at: float | None,
    page_cap: int | None = None,
    subaccounts: int = DEFAULT_SUBACCOUNTS,
    region: str = "global",
    spelling: Spelling = "camel",
    latency: Latency | None = None,
) -> None:
    """Run the simulator in the foreground until interrupted (the CLI's ``simulator``)."""
    clock = SimClock(frozen_at) if frozen_at is not None else SimClock.running()
    sim = Simulator(
        seed=seed,
        scale=scale,
        clock=clock,
        host=host,
        port=port,
        page_cap=page_cap,
        subaccounts=subaccounts,
        region=region,
        spelling=spelling,
        latency=latency,
    )
    # Generate the main account's history before announcing readiness; a sub-account's is
    # generated when first asked for.
    len(sim.dataset.funding)
    with sim:
        creds = sim.credentials
        print(f"# WhiteBIT simulator listening on {sim.url}", flush=True)
        capped = f", pages capped at {page_cap} records" if page_cap else ""
        capped += ", fields spelled as the OpenAPI file does" if spelling == "openapi" else ""
        if latency is not None and latency.round_trip_s:
            capped += f", {latency.round_trip_s:g} s a round trip (jitter {latency.jitter_s:g} s)"
        accounts = f"region {region}, {subaccounts} sub-accounts"
        print(f"# seed {seed}, scale {scale}, {accounts}{capped}; in a shell:", flush=True)
        print(_export("WHITEBIT_BASE_URL", sim.url), flush=True)
        print(_export("WHITEBIT_API_KEY", creds.api_key), flush=True)
        print(
            _export("WHITEBIT_API_SECRET", creds.api_secret, "the main account's key"), flush=True
        )
        for role in sim.subaccount_roles:
            sub = sim.credentials_for(role)
            print(_export(_variable(role, "API_KEY"), sub.api_key), flush=True)
            print(_export(_variable(role, "API_SECRET"), sub.api_secret, role), flush=True)
        print("# Ctrl+C stops it.", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


def _variable(role: str, what: str) -> str:
    """The name a sub-account key's line carries: ``WHITEBIT_SUB_1_API_KEY``."""
    return f"WHITEBIT_{role.upper()}_{what}"


@dataclass
class SpawnedSimulator:
    """A simulator running in its own process (benchmarks, kill tests)."""

    process: subprocess.Popen[str]
    url: str
    credentials: Credentials
    #: The sub-accounts' keys by role (``sub_1`` ..), as the process printed them.
    subaccounts: dict[str, Credentials] = field(default_factory=dict)

    def credentials_for(self, role: str) -> Credentials:
        """The demo key (``partner``) or a sub-account's key (``sub_1`` ..); the main account's
        other keys are not printed, so not known here."""
        if role == "partner":
            return self.credentials
        try:
            return self.subaccounts[role]
        except KeyError:
            known = ", ".join(["partner", *self.subaccounts])
            raise KeyError(f"no key {role!r} printed by the simulator; known: {known}") from None

    @property
    def roles(self) -> list[str]:
        return ["partner", *self.subaccounts]

    def control(self, what: str, **body: Any) -> Any:
        import httpx

        response = httpx.post(f"{self.url}{CONTROL_PREFIX}/{what}", json=body, timeout=10)
        response.raise_for_status()
        return response.json()

    def stats(self, *, reset: bool = False) -> Any:
        """What it answered (per path and status), over how long (per path, from its first to
        its last answer of status 200), and how many requests it refused for a budget; with
        ``reset``, then forget it all."""
        import httpx

        method = "DELETE" if reset else "GET"
        url = f"{self.url}{CONTROL_PREFIX}/stats"
        return httpx.request(method, url, timeout=10).json()

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def spawn(
    *,
    seed: int = DEFAULT_SEED,
    scale: str = "small",
    frozen_at: float | None = None,
    cpu: int | None = None,
    timeout_s: float = 120,
    page_cap: int | None = None,
    subaccounts: int = DEFAULT_SUBACCOUNTS,
    region: str = "global",
    latency: Latency | None = None,
) -> SpawnedSimulator:
    """Start ``python -m pipeline.simulator`` as a child process and wait until it serves."""
    cmd = [
        sys.executable,
        "-m",
        "pipeline.simulator",
        "--port",
        "0",
        "--seed",
        str(seed),
        "--scale",
        scale,
        "--subaccounts",
        str(subaccounts),
        "--region",
        region,
    ]
    if frozen_at is not None:
        cmd += ["--frozen-at", str(frozen_at)]
    if page_cap is not None:
        cmd += ["--page-cap", str(page_cap)]
    if latency is not None:
        cmd += ["--latency", repr(latency.round_trip_s), "--jitter", repr(latency.jitter_s)]
    process = subprocess.Popen(  # noqa: S603 - our own interpreter and module, no shell
        cmd, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"}
    )
    if cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(process.pid, {cpu})
    subs = [subaccount_role(n) for n in range(1, subaccounts + 1)]
    needed = {"WHITEBIT_BASE_URL", "WHITEBIT_API_KEY", "WHITEBIT_API_SECRET"}
    needed |= {_variable(role, what) for role in subs for what in ("API_KEY", "API_SECRET")}
    lines: dict[str, str] = {}
    deadline = time.monotonic() + timeout_s
    assert process.stdout is not None
    while not needed <= lines.keys():
        line = process.stdout.readline()
        if not line or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(f"the simulator did not start: {' '.join(cmd)}")
        match = re.match(r"export (WHITEBIT_\w+)=(\S+)", line)
        if match:
            lines[match.group(1)] = match.group(2)
    # Keep reading what it prints, so a full pipe never stalls it.
    threading.Thread(target=process.stdout.read, daemon=True).start()
    return SpawnedSimulator(
        process,
        lines["WHITEBIT_BASE_URL"],
        Credentials(lines["WHITEBIT_API_KEY"], lines["WHITEBIT_API_SECRET"]),
        {role: _printed(lines, role) for role in subs},
    )


def _export(name: str, value: str, comment: str = "") -> str:
    """A line a shell takes as it is: ``export NAME=value``, quoted where it must be."""
    return f"export {name}={shlex.quote(value)}" + (f"  # {comment}" if comment else "")


def _printed(lines: dict[str, str], role: str) -> Credentials:
    return Credentials(lines[_variable(role, "API_KEY")], lines[_variable(role, "API_SECRET")])
