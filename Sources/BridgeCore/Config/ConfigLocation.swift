/// Where the daemon and its commands find `bridges.conf` (docs/contract.md §3).
public enum ConfigLocation {
    /// The packaged default.
    public static let defaultPath = "/etc/pusher-mqtt-bridge/bridges.conf"
    /// The environment variable that overrides the default.
    public static let environmentVariable = "PUSHER_MQTT_BRIDGE_CONFIG"

    /// `--config FILE` if given, else `$PUSHER_MQTT_BRIDGE_CONFIG` if set and non-empty, else the default.
    public static func resolve(explicit: String?, environment: [String: String]) -> String {
        if let explicit, !explicit.isEmpty { return explicit }
        if let fromEnvironment = environment[environmentVariable], !fromEnvironment.isEmpty { return fromEnvironment }
        return defaultPath
    }
}
