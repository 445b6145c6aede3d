"""The stand-in exchange: the API contract made executable, for tests, benchmarks and the demo."""
