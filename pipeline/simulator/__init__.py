"""The stand-in exchange: the API contract made executable, for tests, benchmarks and the demo.

It implements the contract of `docs/api.md` as strictly as the real service (filled in by its
section on how the real service behaves where the contract is silent): signed requests, nonces,
rate budgets, validation, deterministic data from the seed, the scale and a fixed epoch (growing
at its head with the clock), switchable faults, and a network's round trip when asked. One
simulator stands for one region's service and serves a main account and its sub-accounts, each
key answered from its own account.
It imports `pipeline.spec` and nothing else of the client.
"""

from pipeline.spec import SimClock

from ._accounts import account_dataset, account_seed
from ._answers import SPELLINGS, Spelling
from ._cli import simulator_command
from ._data import EPOCH, Dataset, Profile, Scale, decimal_text
from ._faults import Fault, FaultInjector, Tamper, left_out, new_field, repeated_key
from ._keys import MAIN, REGIONS, Credentials, KeyStore
from ._latency import Latency
from ._server import DEFAULT_SEED, Simulator, SpawnedSimulator, frozen_accounts, serve, spawn

__all__ = [
    "DEFAULT_SEED",
    "EPOCH",
    "MAIN",
    "REGIONS",
    "SPELLINGS",
    "Credentials",
    "Dataset",
    "Fault",
    "FaultInjector",
    "KeyStore",
    "Latency",
    "Profile",
    "Scale",
    "SimClock",
    "Simulator",
    "SpawnedSimulator",
    "Spelling",
    "Tamper",
    "account_dataset",
    "account_seed",
    "decimal_text",
    "frozen_accounts",
    "left_out",
    "new_field",
    "repeated_key",
    "serve",
    "simulator_command",
    "spawn",
]
