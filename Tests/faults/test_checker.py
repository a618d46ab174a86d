"""Unit tests of the fault matrix's checker (pure, well under a second; run by `make test`)."""

from __future__ import annotations

from bridge_testkit.faults.checker import (Expectation, classify, counter_identity, hold_runs, loss_windows,
                                           parse_samples, parse_tag, recovery_time, summarize)


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
    doubled = summarize([classify("s", sent_at(range(3)), arrived([0, 1, 1, 2]))])
    assert Expectation().judge(doubled, None) == []  # counted, allowed unless bounded
    assert Expectation(max_duplicates=1).judge(doubled, None) == []
    assert Expectation(max_duplicates=0).judge(doubled, None) == ["1 duplicates > 0"]


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


def test_loss_windows_per_fault():
    # Two channels at 10/s; around the fault at 5.0 s channel a loses 5.0-5.2 s (3 messages), channel b
    # loses one; around the fault at 20.0 s nothing is lost; a loss long before a fault is not its.
    sent = {"p2m/a": [(i, i / 10) for i in range(300)], "p2m/b": [(i, i / 10) for i in range(300)]}
    lost_a = {50, 51, 52, 10}
    received = {"p2m/a": [(q, t + 0.01) for q, t in sent["p2m/a"] if q not in lost_a],
                "p2m/b": [(q, t + 0.01) for q, t in sent["p2m/b"] if q != 55]}
    assert loss_windows(sent, received, [5.0, 20.0], horizon=5.0) == [0.3, 0.0]
    # Nothing lost at all, and a stream nobody received.
    assert loss_windows(sent, {"p2m/a": [(q, t) for q, t in sent["p2m/a"]], "p2m/b": sent["p2m/b"]}, [5.0]) == [0.0]
    assert loss_windows({"p2m/a": sent["p2m/a"][:11]}, {}, [0.5]) == [1.1]


def test_hold_runs_longest_gap_and_overlap():
    def sample(t, **held):
        return (t, {c: held.get(c, []) for c in ("x", "y")})
    samples = [sample(0.0, x=["s1"], y=["s2"]),
               sample(1.0, x=[], y=["s2", "s3"]),   # x unheld from 1.0, y held twice from 1.0
               sample(1.5, x=["s3"], y=["s2", "s3"]),
               sample(2.0, x=["s3"], y=["s3"]),
               sample(3.0, x=["s3"], y=[]),         # y unheld from 3.0 to the end (4.0)
               sample(4.0, x=["s3", "s4"], y=[])]    # x twice at the last sample only: 0
    runs = hold_runs(samples, ["x", "y"])
    assert runs == {"x": {"none": 0.5, "twice": 0.0}, "y": {"none": 1.0, "twice": 1.0}}
    # Restricted to a window: the runs are cut to it.
    assert hold_runs(samples, ["x", "y"], since=1.5, until=2.5) == {"x": {"none": 0.0, "twice": 0.0},
                                                                     "y": {"none": 0.0, "twice": 0.5}}
    assert hold_runs([], ["x"]) == {"x": {"none": 0.0, "twice": 0.0}}
