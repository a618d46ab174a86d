"""A full disk degrades the spool, not the data (docs/contract.md §7.6), on a REAL full disk: the
daemon's state_dir is a 1 MiB tmpfs mounted by the test (root only; skipped with the reason when
mounting is not permitted), filled up to FREE_KIB by a filler file; mosquitto is stopped while
the official `pusher` library triggers `events` events of 1 KB. The spool takes what fits, the rest
waits in memory (within the 64 MiB buffer); when the broker is back everything arrives, in order,
and the spool, whose records are all delivered, frees its own space and resumes. Then the same
again with `second_events`, but this time the filler is deleted while the broker is still away:
the spool resumes with the memory tail written to it, which a SIGKILL of the daemon proves (Pusher
has no replay: after the restart those events can only come from the spool).

`run_disk_full` (Tests/testkit/bridge_testkit/disk_full.py) is also the `disk-full` row of the fault matrix
(Tests/faults/matrix.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bridge_testkit.disk_full import LIVE_EVENTS, STREAM, MountRefused, run_disk_full


def test_disk_full_costs_nothing_that_fits_in_memory(tmp_path: Path):
    try:
        out = run_disk_full(tmp_path, events=3000)
    except MountRefused as e:
        pytest.skip(f"cannot mount a 1 MiB tmpfs for the state_dir: {e}")
    print("\n".join(out["observations"]))
    got = [s for s, _ in out["received"].get(STREAM, [])]
    expected = 3500 + LIVE_EVENTS
    assert set(got) == set(range(expected)), f"{expected - len(set(got))} lost"
    first_seen = list(dict.fromkeys(got))
    assert first_seen == sorted(first_seen), "order not kept"
    assert not out["failures"], out["failures"]
