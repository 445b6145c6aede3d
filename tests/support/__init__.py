"""Helpers the tests share: simulators, clients, CLI runs, records, the secrets ledger."""
