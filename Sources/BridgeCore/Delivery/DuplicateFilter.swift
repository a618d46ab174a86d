import DequeModule

/// Suppresses repeats of recently seen messages, for QoS 1 redelivery (docs/contract.md §5.6).
///
/// The identity is a ``MessageDigest`` the caller builds, normally from
/// (direction, channel or topic, payload) — e.g. `MessageDigest(parts: [Array("mqtt".utf8),
/// Array(topic.utf8), payload])` — or from a message id when the source has one.
///
/// **What it catches**: a message whose identity was first seen less than `window` ago and
/// that is among the last `capacity` distinct identities — the typical QoS 1 redelivery after
/// a reconnect (the broker resends an unacknowledged PUBLISH with DUP set and the same payload),
/// or the same event arriving twice through a resubscription.
///
/// **What it cannot catch**:
/// - a redelivery later than `window` after the first copy, or after more than `capacity`
///   other distinct messages (bounded memory: the oldest identities are forgotten first);
/// - a redelivery across a daemon restart (memory only; the spool is at-least-once);
/// - a duplicate whose bytes differ (e.g. an envelope with a new timestamp).
///
/// **What it wrongly catches**: a *genuinely repeated* identical message (a sensor publishing
/// the same reading twice on the same topic) within `window` of the first — it is
/// indistinguishable by content. Keep the window short (seconds) and prefer a real message id
/// as identity when the source provides one. The window runs from the *first* sighting and is
/// not extended by repeats, so a steadily repeating value is passed through once per window,
/// never swallowed forever.
///
/// **Connections.** For MQTT redelivery the daemon uses the narrower pair ``record(_:now:)`` and
/// ``isRedelivery(_:now:)`` with ``startConnection()``: a message can only be a redelivery of
/// one received on an *earlier* connection (the broker resends what we had not acknowledged),
/// each earlier copy excuses at most one repeat, and identical messages within one connection
/// are never compared — so a sensor repeating a value is not mistaken for a redelivery.
///
/// Pure value type; time is passed in, never read.
public struct DuplicateFilter<Instant: InstantProtocol>: Sendable where Instant.Duration == Swift.Duration {
    /// How long an identity is remembered after its first sighting.
    public let window: Duration
    /// Most identities remembered.
    public let capacity: Int
    /// Duplicates reported so far.
    public private(set) var duplicatesFound = 0
    /// Identities forgotten because the filter was full before their window ended.
    public private(set) var evictedBeforeExpiry = 0

    private struct Entry {
        var identity: MessageDigest
        var deadline: Instant
    }

    private struct Sighting {
        var deadline: Instant
        var connection: Int
    }

    private var entries: Deque<Entry> = []
    private var deadlines: [MessageDigest: Sighting] = [:]
    private var connection = 0

    /// An empty filter.
    public init(window: Duration = .seconds(30), capacity: Int = 10_000) {
        self.window = window
        self.capacity = max(1, capacity)
    }

    /// Identities remembered.
    public var count: Int { entries.count }

    /// A new connection begins: what is remembered from now on belongs to it, and only
    /// identities from earlier connections count for ``isRedelivery(_:now:)``.
    public mutating func startConnection() {
        connection += 1
    }

    /// Remembers `identity` as seen on the current connection (first sighting wins).
    public mutating func record(_ identity: MessageDigest, now: Instant) {
        forgetExpired(now: now)
        if let sighting = deadlines[identity] {
            // A repeat on a newer connection moves the identity to that connection.
            deadlines[identity] = Sighting(deadline: sighting.deadline, connection: connection)
            return
        }
        remember(identity, now: now)
    }

    /// True if `identity` was seen on an earlier connection less than `window` ago; that
    /// sighting is then used up (one earlier copy excuses one redelivery). Remembers nothing.
    public mutating func isRedelivery(_ identity: MessageDigest, now: Instant) -> Bool {
        forgetExpired(now: now)
        guard let sighting = deadlines[identity], sighting.connection < connection else { return false }
        deadlines[identity] = Sighting(deadline: sighting.deadline, connection: connection)
        duplicatesFound += 1
        return true
    }

    private mutating func remember(_ identity: MessageDigest, now: Instant) {
        if entries.count >= capacity {
            evictedBeforeExpiry += 1
            forgetOldest()
        }
        let deadline = now.advanced(by: window)
        entries.append(Entry(identity: identity, deadline: deadline))
        deadlines[identity] = Sighting(deadline: deadline, connection: connection)
    }

    private mutating func forgetExpired(now: Instant) {
        while let oldest = entries.first, oldest.deadline <= now {
            forgetOldest()
        }
    }

    private mutating func forgetOldest() {
        guard let oldest = entries.popFirst() else { return }
        deadlines[oldest.identity] = nil
    }
}
