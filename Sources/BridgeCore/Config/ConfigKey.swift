/// One key of `bridges.conf`: the table it belongs to, its default and what it means.
///
/// ``ConfigKey/all`` is the one table of keys: the loader accepts exactly these keys in each table
/// (an unknown key is refused with a "did you mean" hint), and docs/configuration.md is generated
/// from it (`make config-reference`; `ConfigReferenceTests` fails when the file differs). A key
/// added to the loader without a line here is refused as unknown, so the two cannot drift.
public struct ConfigKey: Sendable, Equatable {
    /// The TOML table a key is written in.
    public enum Table: String, Sendable, CaseIterable {
        case daemon = "[daemon]"
        case bridge = "[[bridge]]"
        case pusher = "[bridge.pusher]"
        case mqtt = "[bridge.mqtt]"
        case reconnect = "[bridge.reconnect]"
        case buffer = "[bridge.buffer]"
        case pusherRule = "[[bridge.rule]] with from = \"pusher\""
        case mqttRule = "[[bridge.rule]] with from = \"mqtt\""
        case presence = "[[bridge.presence]]"
        case webhooks = "[bridge.webhooks]"
        case cluster = "[bridge.cluster]"
        case users = "[bridge.users]"

        /// What the table is for, in one or two sentences (the reference's introduction to it).
        public var summary: String {
            switch self {
            case .daemon: "The process: logging, the metrics endpoint, where state is kept, the webhook listener."
            case .bridge: "One bridge: a Pusher app paired with an MQTT broker. The file may define several."
            case .pusher: "The bridge's Pusher side: the app, the server, the connections and signing."
            case .mqtt: "The bridge's MQTT side: the broker, the session and the bridge's own topics."
            case .reconnect: "The backoff both sides use after a lost connection or a failed request."
            case .buffer: "The buffer (and spool) of each direction."
            case .pusherRule: "Pusher → MQTT: events on a channel (or on every channel under a prefix) published to a topic."
            case .mqttRule: "MQTT → Pusher: messages on a topic filter sent as Pusher events, to a user, or as a termination."
            case .presence: "A presence channel's members mirrored to retained topics."
            case .webhooks: "Pusher's webhooks for this bridge, published to MQTT (needs `[daemon] webhooks`)."
            case .cluster: "Several daemons sharing one bridge (see the operator's guide on clusters)."
            case .users: "Where the bridge publishes who of its watchlist is online and the events sent to its user."
            }
        }
    }

    public let table: Table
    public let name: String
    /// The default as written in the reference: a value, `required`, or `—` (none).
    public let defaultValue: String
    public let meaning: String

    init(_ table: Table, _ name: String, _ defaultValue: String, _ meaning: String) {
        self.table = table
        self.name = name
        self.defaultValue = defaultValue
        self.meaning = meaning
    }

    /// Every key, table by table, in the order the reference lists them.
    public static let all: [ConfigKey] = process + pusherSide + mqttSide + delivery + rules + extensions

    /// The keys of `table`, in order.
    public static func names(in table: Table) -> [String] {
        all.filter { $0.table == table }.map(\.name)
    }
}

/// docs/configuration.md, generated from ``ConfigKey/all``.
public enum ConfigReference {
    /// The whole file.
    public static func markdown() -> String {
        var out = """
            # Configuration reference

            <!-- Generated from Sources/BridgeCore/Config/ConfigKey*.swift by `make config-reference`;
                 edit those files, not this one (ConfigReferenceTests fails when they differ). -->

            `bridges.conf` is TOML. `pusher-mqtt-bridge check` validates a file with exactly the rules
            `run` uses and names the position of every problem; an unknown key is refused with the
            nearest known one. Durations are strings such as `"500ms"`, `"30s"`, `"2m"`; sizes such as
            `"64KiB"`; `${VAR}` in a string is read from the environment (`${VAR:-fallback}` gives a
            default, `$${` a literal `${`); every `*_file` key reads a secret from a file, relative to
            `$CREDENTIALS_DIRECTORY` when systemd sets it. The behaviour behind each key is in
            [contract.md](contract.md).

            """
        for table in ConfigKey.Table.allCases {
            out += "\n## `\(table.rawValue)`\n\n\(table.summary)\n\n| key | default | meaning |\n|---|---|---|\n"
            for key in ConfigKey.all where key.table == table {
                out += "| `\(key.name)` | \(key.defaultValue) | \(key.meaning) |\n"
            }
        }
        return out
    }
}
