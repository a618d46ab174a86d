/// What the Pusher client refuses in its options, stated once. PusherChannels'
/// `PusherClientOptions.problems` (checked when the bridge makes its client, so when a bridge
/// starts) and the config loader (BridgeCore, `[bridge.pusher]`) both call these, so `check`
/// refuses exactly what `run` would (docs/contract.md §4 `[bridge.pusher]`).
///
/// Each `…Problem` function returns what is wrong as a phrase that follows the value's name, or
/// `nil` when the client accepts the value.
public enum PusherClientLimits {
    /// The shortest `activity_timeout`: servers announce theirs in whole seconds
    /// (`pusher:connection_established`), and a ping more often than once a second is a flood.
    public static let minimumActivityTimeout: Duration = .seconds(1)
    /// The shortest `pong_timeout`: less does not survive one slow round trip.
    public static let minimumPongTimeout: Duration = .milliseconds(100)
    /// TCP ports (`port`, `rest_port`).
    public static let ports: ClosedRange<Int> = 1...65535

    public static func activityTimeoutProblem(_ timeout: Duration) -> String? {
        timeout >= minimumActivityTimeout ? nil : "must be at least 1s"
    }

    public static func pongTimeoutProblem(_ timeout: Duration) -> String? {
        timeout >= minimumPongTimeout ? nil : "must be at least 100ms"
    }

    public static func portProblem(_ port: Int) -> String? {
        ports.contains(port) ? nil : "must be between 1 and 65535"
    }
}
