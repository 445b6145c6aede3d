"""The Dagster application: every account's assets, partitions, checks, jobs, schedules and
resources, the code location (`definitions`) and the `whitebit-etl` command (`cli`, `runs`).

It sits on top of the libraries: assets are thin, each made from a history's declaration
(`histories`), the work done by `loading`, what happened said as run metadata and checks
(`steps`, `checks`). The settings (`settings`) are read once, at the edges; the accounts come
from them (`accounts`); `jobs` builds an asset set for each.
"""
