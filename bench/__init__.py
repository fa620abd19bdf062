"""fusebind benchmarks: the suite (`python -m bench.suite`) and the per-topic benches."""
