/// The server's keep-alive rule for one connection (docs/pusher-protocol.md §1, "Keep-alive").
///
/// Any frame from the client counts as activity. After `activityTimeout` of silence the server
/// sends `pusher:ping`; if the client then stays silent for `pongTimeout`, the server closes the
/// connection with 4201 ("pong reply not received"). Pure: time is passed in.
public struct ActivityMonitor: Sendable {
    /// What the connection owner must do when the deadline is reached.
    public enum Action: Sendable, Equatable {
        /// Nothing yet; wait until ``ActivityMonitor/deadline``.
        case none
        /// Send `pusher:ping` to the silent client.
        case sendPing
        /// Close the connection with 4201: the client did not answer the ping.
        case closeForInactivity
    }

    public let activityTimeout: Duration
    public let pongTimeout: Duration
    private(set) var lastActivity: ContinuousClock.Instant
    private(set) var pingSentAt: ContinuousClock.Instant?

    public init(activityTimeout: Duration, pongTimeout: Duration, now: ContinuousClock.Instant) {
        self.activityTimeout = activityTimeout
        self.pongTimeout = pongTimeout
        self.lastActivity = now
    }

    /// A frame (of any kind) arrived from the client.
    public mutating func receivedFrame(now: ContinuousClock.Instant) {
        lastActivity = now
        pingSentAt = nil
    }

    /// When ``deadlineReached(now:)`` should next be called.
    public var deadline: ContinuousClock.Instant {
        if let pingSentAt { return pingSentAt + pongTimeout }
        return lastActivity + activityTimeout
    }

    /// The timer fired (possibly late or early); decides what to do.
    public mutating func deadlineReached(now: ContinuousClock.Instant) -> Action {
        guard now >= deadline else { return .none }
        if pingSentAt != nil { return .closeForInactivity }
        pingSentAt = now
        return .sendPing
    }
}
