"""Side-by-side benchmarks (not tests): ``python -m benchmarks [operator|lookup|spark]``."""
