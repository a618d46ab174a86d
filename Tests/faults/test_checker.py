"""Unit tests of the fault matrix's checker (pure, well under a second; run by `make test`)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from checker import Expectation, classify, counter_identity, parse_samples, parse_tag, recovery_time, summarize  # noqa: E402


def sent_at(seqs, rate=100.0):
    return [(s, s / rate) for s in seqs]


def arrived(seqs, start=0.0, step=0.01):
    return [(s, start + i * step) for i, s in enumerate(seqs)]


def test_parse_tag():
    assert parse_tag("p2m:12") == ("p2m", 12)
    assert parse_tag("m2p:0") == ("m2p", 0)
    assert parse_tag("p2m") is None
    assert parse_tag("p2m:x") is None
    assert parse_tag(":3") is None
    assert parse_tag("p2m:-1") is None


def test_all_delivered_in_order():
    r = classify("p2m/a", sent_at(range(10)), arrived(range(10)))
    assert (r.sent, r.delivered, r.lost, r.duplicates, r.reordered, r.unexpected) == (10, 10, 0, 0, 0, 0)
    assert r.loss_windows == []


def test_lost_messages_and_their_windows():
    r = classify("p2m/a", sent_at(range(10)), arrived([0, 1, 4, 5, 6, 9]))
    assert r.lost == 4 and r.lost_seqs == [2, 3, 7, 8]
    assert r.delivered == 6
    assert [(a, b) for a, b, _ in r.loss_windows] == [(2, 3), (7, 8)]
    assert abs(r.loss_windows[0][2] - 0.01) < 1e-9


def test_loss_at_the_end_is_a_window():
    r = classify("s", sent_at(range(5)), arrived([0, 1]))
    assert [(a, b) for a, b, _ in r.loss_windows] == [(2, 4)]


def test_duplicates_are_counted_not_reordered():
    # QoS 1 redelivery: 3 and 4 come again after 5 -- duplicates, not reordering.
    r = classify("s", sent_at(range(7)), arrived([0, 1, 2, 3, 4, 5, 3, 4, 6]))
    assert r.duplicates == 2
    assert r.reordered == 0
    assert r.lost == 0


def test_reordering_is_counted_by_first_arrival():
    r = classify("s", sent_at(range(6)), arrived([0, 2, 1, 3, 5, 4]))
    assert r.reordered == 2
    assert r.reordered_seqs == [1, 4]
    assert r.lost == 0 and r.duplicates == 0


def test_unexpected_messages_are_never_delivered():
    r = classify("s", sent_at(range(3)), arrived([0, 1, 2, 99]))
    assert r.unexpected == 1
    assert r.delivered == 3


def test_reorder_uses_send_order_not_sequence_value():
    # A stream whose sender interleaves sequence numbers: order is the send order.
    sent = [(5, 0.0), (3, 0.1), (9, 0.2)]
    assert classify("s", sent, arrived([5, 3, 9])).reordered == 0
    assert classify("s", sent, arrived([3, 5, 9])).reordered == 1


def test_recovery_time_is_first_arrival_of_a_message_sent_after_the_fault():
    sent = [(0, 0.0), (1, 1.0), (2, 2.0), (3, 3.0)]
    received = [(0, 0.1), (2, 4.5), (3, 4.6), (1, 4.4)]
    assert recovery_time(sent, received, fault_end=2.0) == 2.5
    assert recovery_time(sent, received[:1], fault_end=2.0) is None


def test_expectations_judge_totals():
    ok = summarize([classify("s", sent_at(range(10)), arrived(range(10)))])
    assert Expectation().judge(ok, 0.5) == []
    lossy = summarize([classify("s", sent_at(range(10)), arrived(range(7)))])
    assert Expectation(max_lost=3).judge(lossy, 0.5) == []
    assert Expectation(max_lost=2).judge(lossy, 0.5) == ["lost 3 > 2"]
    reordered = summarize([classify("s", sent_at(range(3)), arrived([1, 0, 2]))])
    assert Expectation().judge(reordered, None) == ["1 reordered"]
    assert Expectation(allow_reorder=True).judge(reordered, None) == []
    assert Expectation(max_recovery_s=2).judge(ok, 3.0) == ["recovery 3.0s > 2.0s"]
    assert Expectation(max_recovery_s=2).judge(ok, None) == ["recovery never > 2.0s"]
    assert Expectation().judge(summarize([]), None) == ["nothing was sent"]


def test_totals_add_up_over_streams():
    a = classify("a", sent_at(range(4)), arrived([0, 1, 1, 3]))
    b = classify("b", sent_at(range(2)), arrived([1, 0]))
    t = summarize([a, b])
    assert (t.sent, t.delivered, t.lost, t.duplicates, t.reordered) == (6, 5, 1, 1, 1)


SCRAPE = """# HELP pusher_mqtt_bridge_received_total x
# TYPE pusher_mqtt_bridge_received_total counter
pusher_mqtt_bridge_received_total{bridge="b",direction="pusher_to_mqtt"} 10
pusher_mqtt_bridge_received_total{bridge="b",direction="mqtt_to_pusher"} 7
pusher_mqtt_bridge_received_total{bridge="other",direction="mqtt_to_pusher"} 99
pusher_mqtt_bridge_messages_total{bridge="b",rule="r1",direction="pusher_to_mqtt",outcome="delivered"} 6
pusher_mqtt_bridge_messages_total{bridge="b",rule="r2",direction="pusher_to_mqtt",outcome="dropped"} 1
pusher_mqtt_bridge_messages_total{bridge="b",rule="m",direction="mqtt_to_pusher",outcome="delivered"} 5
pusher_mqtt_bridge_buffered_messages{bridge="b",direction="pusher_to_mqtt"} 3
pusher_mqtt_bridge_buffered_messages{bridge="b",direction="mqtt_to_pusher"} 1
pusher_mqtt_bridge_delivery_seconds_bucket{le="0.1"} 4
"""


def test_counter_identity_per_direction():
    ids = counter_identity(SCRAPE, "b")
    assert ids["pusher_to_mqtt"].holds and str(ids["pusher_to_mqtt"]) == "10 = 7 + 3"
    # 7 received, 5 delivered + 1 buffered: one message unaccounted for.
    assert not ids["mqtt_to_pusher"].holds and str(ids["mqtt_to_pusher"]) == "7 != 5 + 1"


def test_counter_identity_of_an_unknown_bridge_is_all_zero():
    ids = counter_identity(SCRAPE, "nope")
    assert all(i.holds and i.received == 0 for i in ids.values())


def test_parse_samples_skips_comments_and_garbage():
    samples = parse_samples("# c\nfoo 1\nbar{a=\"x\"} 2.5\nbroken line here\n\nbaz{} NaNx\n")
    assert samples == [("foo", {}, 1.0), ("bar", {"a": "x"}, 2.5)]
