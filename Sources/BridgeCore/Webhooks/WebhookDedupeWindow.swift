/// Remembers the digests of accepted webhook bodies for a while, so that a request Pusher sends
/// again (it retries for 5 minutes when it got no 2xx in time) publishes nothing a second time
/// (docs/contract.md §7.2).
///
/// Bounded: at most `capacity` digests of 16 bytes each; past that the oldest is forgotten first.
/// Pure value type; time is passed in, never read.
public struct WebhookDedupeWindow<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    /// How long a body is remembered.
    public let window: Duration
    /// The most digests kept.
    public let capacity: Int
    private var order: [(digest: MessageDigest, at: Instant)] = []
    /// Index of the oldest live entry in `order` (entries before it are expired).
    private var head = 0
    private var seen: [MessageDigest: Instant] = [:]

    /// A window of `window` (default 5 minutes) holding at most `capacity` digests.
    public init(window: Duration = .seconds(300), capacity: Int = 100_000) {
        self.window = window
        self.capacity = max(1, capacity)
    }

    /// How many digests are remembered now.
    public var count: Int { seen.count }

    /// Whether `digest` was remembered within the window; otherwise it is remembered from `now` on.
    public mutating func isRepeat(_ digest: MessageDigest, now: Instant) -> Bool {
        expire(now: now)
        if let at = seen[digest], at.duration(to: now) < window { return true }
        seen[digest] = now
        order.append((digest, now))
        while seen.count > capacity || order.count - head > 2 * capacity { dropOldest() }
        return false
    }

    /// Forgets `digest`: the request it belongs to was answered 503, so its retry must go through.
    public mutating func forget(_ digest: MessageDigest) {
        seen[digest] = nil
    }

    private mutating func expire(now: Instant) {
        while head < order.count, order[head].at.duration(to: now) >= window { dropOldest() }
    }

    private mutating func dropOldest() {
        guard head < order.count else { return }
        let oldest = order[head]
        head += 1
        // Only when this entry is still the one remembered (a forgotten and re-added digest has a later one).
        if seen[oldest.digest] == oldest.at { seen[oldest.digest] = nil }
        if head > 1024, head * 2 > order.count {
            order.removeFirst(head)
            head = 0
        }
    }
}
