import Locking
import Logging
import NIOCore
import PusherProtocol

/// Fault switches set through the control endpoints (development only).
struct FaultSwitches: Sendable {
    /// Whether `pusher:ping` is answered with `pusher:pong` (off: provoke client pong timeouts).
    var answerPings = true
    /// When set, new connections are accepted and closed at once with this code (e.g. 4001).
    var refusal: (code: UInt16, reason: String)?
    /// Whether publishes through the HTTP API (`events`, `batch_events`) are refused with 403, as
    /// hosted Pusher refuses an app over its message quota.
    var quotaExceeded = false
}
