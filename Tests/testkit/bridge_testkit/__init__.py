"""The test and benchmark harness of pusher-mqtt-bridge, one package (Tests/testkit/pyproject.toml).

- `harness`: real processes on free 127.0.0.1 ports, stopped by PID -- Process, Mosquitto,
  PusherLocal, Bridge, ClusterMember, a test CA -- plus free_port, wait_until, the paho-mqtt
  collector and publisher, and `bridge_config` (a bridges.conf for one bridge).
- `clients`: the pysher listener, a NOTIFY_SOCKET stand-in.
- `fleet`, `disk_full`, `webhooks`: scenarios shared by Tests/e2e and the fault matrix.
- `faults`: the fault matrix's checker, proxies, traffic, network namespaces and rig (Tests/faults).
- `bench`: processes, receivers and load sources of the benchmarks (Benchmarks/).
"""
