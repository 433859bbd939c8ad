"""Research harnesses: synthetic workloads, multi-turn sessions priced through a prompt cache,
and the context study. They drive the learning service and the engine's selection the way a
runtime would, for `learning-bot simulate`, the benchmarks and the tests; nothing in the engine
imports them."""
