/// The two connections of a bridge as operators see them: STATUS= for systemd, `/readyz`.
public struct BridgeConnectivity: Sendable, Equatable {
    /// The Pusher client's state name (`connecting`, `connected`, `unavailable`, …).
    public var pusherState = "connecting"
    /// The MQTT client's state name (`connecting`, `connected`, `disconnected`, …).
    public var mqttState = "connecting"
    /// Whether the Pusher connection is up.
    public var pusherConnected = false
    /// Whether the MQTT connection is up.
    public var mqttConnected = false
    /// Why the Pusher side last failed to connect (``ConnectionFailureReason``); `nil` once connected.
    public var pusherProblem: String?
    /// Why the MQTT side last failed to connect; `nil` once connected.
    public var mqttProblem: String?

    /// Both sides starting.
    public init() {}

    /// Both sides are connected.
    public var isReady: Bool { pusherConnected && mqttConnected }

    /// Why the bridge is not ready, a line a side that is down (empty when ready), with the
    /// reason of its last failure: `pusher reconnecting: TLS certificate verify failed: …`.
    public var notReadyReasons: [String] {
        var reasons: [String] = []
        if !pusherConnected { reasons.append("pusher \(pusherState)" + (pusherProblem.map { ": " + $0 } ?? "")) }
        if !mqttConnected { reasons.append("mqtt \(mqttState)" + (mqttProblem.map { ": " + $0 } ?? "")) }
        return reasons
    }
}
