"""The fault matrix's parts (Tests/faults/matrix.py, RELIABILITY.md): the checker that classifies
every tagged message, the fault proxies, tagged traffic, network namespaces and the per-row rig."""
