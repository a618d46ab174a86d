/// When the network thread reads from the broker, with `MQTTIncomingOverflow.pauseReading`
/// (docs/contract.md §7.6, docs/mqtt-notes.md §1–2).
///
/// libmosquitto acknowledges a QoS ≥ 1 message before the application sees it, so the only way
/// not to lose what a slow consumer cannot take is not to read it: above the high-water mark of
/// the incoming buffer reading pauses (TCP then holds the broker back, and the broker keeps the
/// rest in our persistent session); below the low-water mark it resumes. While paused, the
/// network thread still writes (our publishes, PINGREQ) but reads nothing, so PINGRESPs and our
/// own PUBACKs wait as well. If the pause outlasts the keep-alive, libmosquitto closes the
/// connection (no PINGRESP read); the session is kept, and the connection is opened again only
/// once reading may resume (``mayReconnect``), so the broker resends what it queued then.
///
/// Pure: the network thread reports the buffer's level with the time, and carries out the change.
struct IncomingFlowControl: Sendable {
    /// A buffer level: messages and payload bytes.
    struct Level: Sendable, Equatable {
        /// Buffered messages.
        var messages: Int
        /// Their payload bytes.
        var bytes: Int
    }

    /// Whether the network thread reads.
    enum Phase: Sendable, Equatable {
        /// Reading as usual.
        case reading
        /// Not reading since this instant.
        case paused(since: ContinuousClock.Instant)
    }

    /// What changed with a reported level (for the owner's log).
    enum Change: Sendable, Equatable {
        /// Reading stops at this level.
        case paused(Level)
        /// Reading resumes after this long a pause.
        case resumed(after: Duration)
    }

    /// At or above either bound, reading pauses.
    let highWater: Level
    /// At or below both bounds, reading resumes.
    let lowWater: Level
    /// Whether the network thread reads now.
    private(set) var phase: Phase = .reading

    /// Pauses at `capacity` messages or `byteCapacity` payload bytes, resumes at half of both.
    init(capacity: Int, byteCapacity: Int) {
        let high = Level(messages: max(capacity, 1), bytes: max(byteCapacity, 1))
        highWater = high
        lowWater = Level(messages: high.messages / 2, bytes: high.bytes / 2)
    }

    /// Whether reading is paused.
    var isPaused: Bool { phase != .reading }

    /// Whether a lost connection may be opened again: not while paused, because a new
    /// connection would only be handed the messages there is no room for (the broker keeps them).
    var mayReconnect: Bool { !isPaused }

    /// The network thread saw this level of the incoming buffer.
    mutating func bufferLevelObserved(_ level: Level, now: ContinuousClock.Instant) -> Change? {
        switch phase {
        case .reading:
            guard level.messages >= highWater.messages || level.bytes >= highWater.bytes else { return nil }
            phase = .paused(since: now)
            return .paused(level)
        case .paused(let since):
            guard level.messages <= lowWater.messages, level.bytes <= lowWater.bytes else { return nil }
            phase = .reading
            return .resumed(after: since.duration(to: now))
        }
    }
}
