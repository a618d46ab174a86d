/// The bridge's version, shown by `pusher-mqtt-bridge --version` and sent to Pusher as the
/// `version` query parameter of the WebSocket URL (docs/contract.md §5.5).
public enum BridgeCoreVersion {
    /// Semantic version of this build.
    public static let current = "0.1.0"
}
