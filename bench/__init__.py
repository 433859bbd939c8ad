"""The benchmarks: each module answers one question of BENCHMARKS.md (or RELIABILITY.md) and
runs from the repository's root as `python -m bench.<name>` (`.venv/bin/python -m bench.select`),
so that modules named like others (`bench.select`, `bench.http`, `bench.storage`,
`bench.discord`) never stand in for the standard library's, the project's or a dependency's.
`bench.table` prints every table."""
