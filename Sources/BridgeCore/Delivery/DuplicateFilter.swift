import DequeModule

/// Suppresses repeats of recently seen messages, for QoS 1 redelivery (DESIGN §5.6).
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
/// Pure value type; time is passed in, never read.
public struct DuplicateFilter<Instant: InstantProtocol> where Instant.Duration == Swift.Duration {
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

    private var entries: Deque<Entry> = []
    private var deadlines: [MessageDigest: Instant] = [:]

    /// An empty filter.
    public init(window: Duration = .seconds(30), capacity: Int = 10_000) {
        self.window = window
        self.capacity = max(1, capacity)
    }

    /// Identities remembered.
    public var count: Int { entries.count }

    /// True if `identity` was first seen less than `window` before `now` (and is still
    /// remembered); otherwise remembers it from `now` and returns false.
    public mutating func isDuplicate(_ identity: MessageDigest, now: Instant) -> Bool {
        while let oldest = entries.first, oldest.deadline <= now {
            forgetOldest()
        }
        if deadlines[identity] != nil {
            duplicatesFound += 1
            return true
        }
        if entries.count >= capacity {
            evictedBeforeExpiry += 1
            forgetOldest()
        }
        let deadline = now.advanced(by: window)
        entries.append(Entry(identity: identity, deadline: deadline))
        deadlines[identity] = deadline
        return false
    }

    private mutating func forgetOldest() {
        guard let oldest = entries.popFirst() else { return }
        deadlines[oldest.identity] = nil
    }
}
