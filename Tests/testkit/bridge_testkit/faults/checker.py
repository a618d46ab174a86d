"""The fault matrix's checker: classifies every tagged message as delivered, lost, duplicated or
reordered, per stream (a direction plus a channel or topic). Pure Python, no I/O, unit-tested in
test_checker.py.

A tag is `direction:seq` (e.g. `p2m:123`). The sender records (tag, send time) in send order; the
receiver records (tag, arrival time) in arrival order, duplicates included. Per stream:

- delivered: sent tags that arrived at least once;
- lost: sent tags that never arrived;
- duplicates: arrivals beyond the first of a tag (QoS 1 redelivery; docs/contract.md §5.6 allows them);
- reordered: tags whose first arrival came after the first arrival of a tag sent later
  (order per channel/topic must be kept, docs/contract.md §5.6);
- unexpected: arrivals of tags that were never sent (must be zero: nothing invented);
- loss windows: runs of consecutive lost sequence numbers, with their send-time span, so a loss
  can be compared with the time the far side was unreachable.
"""

from __future__ import annotations

from dataclasses import dataclass, field


def parse_tag(tag: str) -> tuple[str, int] | None:
    """`p2m:12` -> ("p2m", 12); anything else -> None."""
    direction, sep, seq = tag.partition(":")
    if not sep or not direction or not seq.isdigit():
        return None
    return direction, int(seq)


@dataclass
class StreamReport:
    """The classification of one stream."""

    stream: str
    sent: int = 0
    delivered: int = 0
    lost: int = 0
    duplicates: int = 0
    reordered: int = 0
    unexpected: int = 0
    lost_seqs: list[int] = field(default_factory=list)
    loss_windows: list[tuple[int, int, float]] = field(default_factory=list)  # (first seq, last seq, seconds sent over)
    reordered_seqs: list[int] = field(default_factory=list)


def classify(stream: str, sent: list[tuple[int, float]], received: list[tuple[int, float]]) -> StreamReport:
    """sent: (seq, send time) in send order; received: (seq, arrival time) in arrival order."""
    report = StreamReport(stream=stream, sent=len(sent))
    send_index = {seq: i for i, (seq, _) in enumerate(sent)}
    send_time = dict(sent)
    seen: set[int] = set()
    highest_index = -1
    for seq, _ in received:
        if seq not in send_index:
            report.unexpected += 1
            continue
        if seq in seen:
            report.duplicates += 1
            continue
        seen.add(seq)
        index = send_index[seq]
        if index < highest_index:
            report.reordered += 1
            report.reordered_seqs.append(seq)
        else:
            highest_index = index
    report.delivered = len(seen)
    report.lost_seqs = [seq for seq, _ in sent if seq not in seen]
    report.lost = len(report.lost_seqs)
    # Runs of consecutive (in send order) lost messages.
    run: list[int] = []
    for seq, _ in sent:
        if seq not in seen:
            run.append(seq)
        elif run:
            report.loss_windows.append((run[0], run[-1], send_time[run[-1]] - send_time[run[0]]))
            run = []
    if run:
        report.loss_windows.append((run[0], run[-1], send_time[run[-1]] - send_time[run[0]]))
    return report


def recovery_time(sent: list[tuple[int, float]], received: list[tuple[int, float]], fault_end: float) -> float | None:
    """Seconds from `fault_end` until the first message sent at or after it arrived (the flow is
    live again); None when no such message arrived."""
    sent_after = {seq for seq, t in sent if t >= fault_end}
    arrivals = [t for seq, t in received if seq in sent_after]
    if not arrivals:
        return None
    return max(0.0, min(arrivals) - fault_end)


@dataclass
class Totals:
    """The sum over the streams of one direction."""

    sent: int = 0
    delivered: int = 0
    lost: int = 0
    duplicates: int = 0
    reordered: int = 0
    unexpected: int = 0

    def add(self, r: StreamReport) -> None:
        self.sent += r.sent
        self.delivered += r.delivered
        self.lost += r.lost
        self.duplicates += r.duplicates
        self.reordered += r.reordered
        self.unexpected += r.unexpected


def summarize(reports: list[StreamReport]) -> Totals:
    totals = Totals()
    for r in reports:
        totals.add(r)
    return totals


@dataclass
class Expectation:
    """What a direction must show in a row, written before the row runs.

    max_lost: the loss bound (0 = zero loss); duplicates are always allowed but counted;
    reordering allowed only when `allow_reorder`; unexpected messages never."""

    max_lost: int = 0
    allow_reorder: bool = False
    max_recovery_s: float | None = None
    why: str = ""
    max_duplicates: int | None = None  # None: duplicates allowed (counted)

    def judge(self, totals: Totals, recovery: float | None) -> list[str]:
        """The reasons this expectation was missed; empty = PASS."""
        misses = []
        if totals.sent == 0:
            misses.append("nothing was sent")
        if totals.lost > self.max_lost:
            misses.append(f"lost {totals.lost} > {self.max_lost}")
        if totals.reordered and not self.allow_reorder:
            misses.append(f"{totals.reordered} reordered")
        if totals.unexpected:
            misses.append(f"{totals.unexpected} unexpected")
        if self.max_duplicates is not None and totals.duplicates > self.max_duplicates:
            misses.append(f"{totals.duplicates} duplicates > {self.max_duplicates}")
        if self.max_recovery_s is not None and (recovery is None or recovery > self.max_recovery_s):
            misses.append(f"recovery {'never' if recovery is None else f'{recovery:.1f}s'} > {self.max_recovery_s:.1f}s")
        return misses


# ---- counter identity (docs/contract.md §7.6) ----------------------------------------------
OUTCOME_FAMILY = "pusher_mqtt_bridge_messages_total"
RECEIVED_FAMILY = "pusher_mqtt_bridge_received_total"
BUFFERED_FAMILY = "pusher_mqtt_bridge_buffered_messages"


def parse_samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    """Prometheus text -> [(family, labels, value)]; comments and unparsable lines are skipped."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        head, _, value = line.rpartition(" ")
        name, _, rest = head.partition("{")
        labels = {}
        for part in rest.rstrip("}").split(","):
            key, eq, val = part.partition("=")
            if eq:
                labels[key.strip()] = val.strip().strip('"')
        try:
            out.append((name.strip(), labels, float(value)))
        except ValueError:
            continue
    return out


@dataclass
class Identity:
    """received_total = the sum of the messages_total outcomes + buffered_messages, one direction."""

    direction: str
    received: float
    outcomes: float
    buffered: float

    @property
    def holds(self) -> bool:
        return self.received == self.outcomes + self.buffered

    def __str__(self) -> str:
        mark = "=" if self.holds else "!="
        return f"{self.received:g} {mark} {self.outcomes:g} + {self.buffered:g}"


def counter_identity(metrics_text: str, bridge: str) -> dict[str, Identity]:
    """The identity of each direction of `bridge`, from one scrape of /metrics."""
    samples = [s for s in parse_samples(metrics_text) if s[1].get("bridge") == bridge]
    result = {}
    for direction in ("pusher_to_mqtt", "mqtt_to_pusher"):
        def total(family: str) -> float:
            return sum(v for n, lb, v in samples if n == family and lb.get("direction") == direction)
        result[direction] = Identity(direction, total(RECEIVED_FAMILY), total(OUTCOME_FAMILY), total(BUFFERED_FAMILY))
    return result


# ---- clusters (Tests/faults/cluster_rows.py) -------------------------------------------------

def loss_windows(sent: dict, received: dict, faults: list[float], horizon: float = 20.0) -> list[float]:
    """Per fault time: the longest span (s) of consecutive lost messages on one stream (a channel),
    the run's first one sent from 1 s before the fault to `horizon` s after, by the sender's times,
    plus the stream's mean send interval (so the span is the gap between the last message before the
    run and the first after it); 0.0 when nothing around that fault was lost."""
    windows = []
    for fault in faults:
        worst = 0.0
        for stream in sent:
            report = classify(stream, sent[stream], received.get(stream, []))
            times = dict(sent[stream])
            interval = (sent[stream][-1][1] - sent[stream][0][1]) / max(1, len(sent[stream]) - 1)
            for first, last, _ in report.loss_windows:
                if fault - 1.0 <= times[first] <= fault + horizon:
                    worst = max(worst, times[last] - times[first] + interval)
        windows.append(round(worst, 2))
    return windows


def hold_runs(samples: list[tuple[float, dict[str, list[str]]]], channels: list[str], since: float = 0.0,
              until: float = float("inf")) -> dict[str, dict[str, float]]:
    """samples: (time, {channel: [holding connections]}) in time order. Per channel, the longest run
    (s) with no holder ("none") and with two or more ("twice") between `since` and `until`; a run
    still open at the last sample counts up to it."""
    out = {c: {"none": 0.0, "twice": 0.0} for c in channels}
    start: dict[str, dict[str, float | None]] = {c: {"none": None, "twice": None} for c in channels}
    window = [s for s in samples if since <= s[0] <= until]
    for t, held in window:
        for c in channels:
            for kind, now in (("none", len(held.get(c, [])) == 0), ("twice", len(held.get(c, [])) >= 2)):
                began = start[c][kind]
                if now and began is None:
                    start[c][kind] = t
                elif not now and began is not None:
                    out[c][kind] = max(out[c][kind], t - began)
                    start[c][kind] = None
    end = window[-1][0] if window else 0.0
    for c in channels:
        for kind in ("none", "twice"):
            began = start[c][kind]
            if began is not None:
                out[c][kind] = max(out[c][kind], end - began)
    return out
