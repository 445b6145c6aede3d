"""``whitebit-etl`` with the client's own retries off, so that an exchange answering 503 sends
the step straight into Dagster's retry wait: the SIGTERM test's child process.

``python -m tests.service.no_client_retries <whitebit-etl args>``
"""

from __future__ import annotations

import sys

from assets import cli, definitions
from assets.accounts import Account
from assets.resources import WhiteBITResource
from assets.settings import Settings

_configured = definitions.whitebit_resource


def _without_retries(account: Account, settings: Settings) -> WhiteBITResource:
    made = _configured(account, settings)
    return WhiteBITResource(
        api_key=made.api_key,
        api_secret=made.api_secret,
        base_url=made.base_url,
        mining_accounts=made.mining_accounts,
        markets=made.markets,
        pacing_dir=made.pacing_dir,
        max_retries=0,
    )


if __name__ == "__main__":
    definitions.whitebit_resource = _without_retries
    cli.main(args=sys.argv[1:], prog_name="whitebit-etl")
