import DequeModule

/// Recognises MQTT messages that are echoes of the bridge's own publishes (docs/contract.md §5.4, MQTT
/// 3.1.1 only: MQTT 5 subscriptions use `no_local` and need no guard).
///
/// A topic↔channel pair bridged in both directions would otherwise loop: Pusher event →
/// our MQTT publish → the broker sends it back to our own subscription → Pusher → …
/// The daemon calls ``recordPublish(_:now:)`` with the digest of each (topic, payload) it hands
/// to the broker, and ``isOwnEcho(_:now:)`` for each message its subscriptions receive.
/// Record **before** calling the MQTT client's publish: the echo can come back on
/// libmosquitto's thread before the publish call has even returned.
///
/// Rules, and why:
/// - **Each recorded publish suppresses exactly one echo.** The broker delivers one copy per
///   publish to our subscription, so a second identical message is someone else's and must
///   cross (a sensor that repeats a value is not a loop).
/// - **A record expires after `window`** (default 10 s): an echo normally returns within
///   milliseconds, but a QoS ≥ 1 publish may sit in libmosquitto's queue during a short
///   broker outage (docs/mqtt-notes.md §3). An echo arriving later than the window crosses once —
///   the loop still cannot repeat, because that crossing publishes into Pusher with our own
///   `socket_id`, which Pusher does not send back to us.
/// - **Bounded memory**: at most `capacity` records (default 10 000, 16 bytes of digest each);
///   when full, the oldest record is evicted early and counted in ``evictedBeforeExpiry``.
///
/// Pure value type; time is passed in, never read.
public struct LoopGuard<Instant: InstantProtocol>: Sendable where Instant.Duration == Swift.Duration {
    /// How long a recorded publish can suppress its echo.
    public let window: Duration
    /// Most records held.
    public let capacity: Int
    /// Echoes recognised and suppressed so far.
    public private(set) var echoesSuppressed = 0
    /// Records evicted because the guard was full before their window ended.
    public private(set) var evictedBeforeExpiry = 0

    private struct Entry {
        var digest: MessageDigest
        var deadline: Instant
    }

    /// Per digest: records still able to suppress an echo, and records already used by an echo
    /// whose entries are still in `entries` (FIFO, so they are always the oldest ones).
    private struct Tally {
        var outstanding = 0
        var consumed = 0
    }

    private var entries: Deque<Entry> = []
    private var tallies: [MessageDigest: Tally] = [:]

    /// An empty guard.
    public init(window: Duration = .seconds(10), capacity: Int = 10_000) {
        self.window = window
        self.capacity = max(1, capacity)
    }

    /// Records held (including ones already used by an echo but not yet expired).
    public var count: Int { entries.count }

    /// Notes that the bridge published this (topic, payload) to the broker at `now`.
    public mutating func recordPublish(_ digest: MessageDigest, now: Instant) {
        expire(now: now)
        if entries.count >= capacity {
            evictedBeforeExpiry += 1
            dropOldest()
        }
        entries.append(Entry(digest: digest, deadline: now.advanced(by: window)))
        tallies[digest, default: Tally()].outstanding += 1
    }

    /// Whether an incoming message with this digest is the echo of one of our publishes; if
    /// so, that publish's record is used up.
    public mutating func isOwnEcho(_ digest: MessageDigest, now: Instant) -> Bool {
        expire(now: now)
        guard var tally = tallies[digest], tally.outstanding > 0 else { return false }
        tally.outstanding -= 1
        tally.consumed += 1
        tallies[digest] = tally
        echoesSuppressed += 1
        return true
    }

    private mutating func expire(now: Instant) {
        while let oldest = entries.first, oldest.deadline <= now {
            dropOldest()
        }
    }

    private mutating func dropOldest() {
        guard let oldest = entries.popFirst(), var tally = tallies[oldest.digest] else { return }
        // Echoes use records oldest-first, so the oldest entry of a digest is a used one
        // whenever any used ones remain.
        if tally.consumed > 0 {
            tally.consumed -= 1
        } else {
            tally.outstanding -= 1
        }
        tallies[oldest.digest] = (tally.outstanding == 0 && tally.consumed == 0) ? nil : tally
    }
}
