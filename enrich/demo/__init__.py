"""Local services for the demo, the examples and the benchmarks (not the library)."""
