"""The extraction libraries: the API contract (`spec`), the client that follows it (`whitebit`)
and the stand-in exchange that serves it (`simulator`). Nothing here imports the warehouse or
the Dagster application."""
