"""`make bench` (scripts/bench.sh): pusher-mqtt-bridge against the broker's ceiling and a Python
baseline, in one run -> BENCHMARKS.md. The benchmark itself (its options, method, processes,
receivers and load sources, which Benchmarks/bridge/bench_rules.py, Benchmarks/rtt and
Benchmarks/instructions reuse) is bridge_testkit.bench (Tests/testkit/bridge_testkit/bench.py).

    .venv/bin/python Benchmarks/bridge/bench.py --bin-dir .build/release --tools-dir DIR [--quick] …
"""

import sys

from bridge_testkit.bench import main

if __name__ == "__main__":
    sys.exit(main())
