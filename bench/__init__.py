"""fastframe benchmarks.

``bench.workloads`` builds the deterministic workloads, ``bench.codecs`` wraps
every codec (the two twins, the peers, the floors) behind one interface,
``bench.test_bench`` holds the pytest-benchmark suite and ``bench.compare``
(``python -m bench.compare``) measures all installed codecs in one run.
"""
