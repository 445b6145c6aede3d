"""What the client logs at DEBUG: enough to follow a request, never what signs it."""

from __future__ import annotations

import asyncio
import logging

import pytest

from pipeline.simulator import Fault, Simulator
from pipeline.whitebit import ServerError
from tests.support.client import Watching, client, raises


def test_debug_logs_redact_the_signing_headers(
    own_sim: Simulator, caplog: pytest.LogCaptureFixture
) -> None:
    watch = Watching()
    own_sim.faults.script([Fault.HTTP_503])

    async def main() -> None:
        async with client(own_sim, transport=watch) as c:
            await c.main_balance()
            await c.funding_history(limit=3)

    with caplog.at_level(logging.DEBUG, logger="pipeline.whitebit"):
        asyncio.run(main())
    ours = "\n".join(r.getMessage() for r in caplog.records if r.name == "pipeline.whitebit")
    assert "'x-txc-payload': '[redacted]'" in ours
    assert "'x-txc-signature': '[redacted]'" in ours
    assert "retrying" in ours  # the 503 was retried, and said so
    assert len(watch.sent) == 3  # the 503, its retry, and the funding page
    for request in watch.sent:
        assert request.headers["X-TXC-PAYLOAD"] not in caplog.text
        assert request.headers["X-TXC-SIGNATURE"] not in caplog.text
        assert request.headers["X-TXC-APIKEY"] not in caplog.text  # shortened, not whole


def test_a_failure_after_retries_tells_no_secret(own_sim: Simulator) -> None:
    own_sim.faults.set(1.0, [Fault.HTTP_500])

    async def main() -> None:
        async with client(own_sim) as c:
            with raises(ServerError) as info:
                await c.hedge_mode()
        assert info.value.attempts > 1

    asyncio.run(main())
