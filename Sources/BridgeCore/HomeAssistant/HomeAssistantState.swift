/// What a bridge reports to Home Assistant at one moment: the counters and connections the
/// runtime reads (the same readings as `/metrics`), before rates are worked out.
public struct HomeAssistantReading: Sendable, Equatable {
    public var mqttConnected: Bool
    public var pusherConnected: Bool
    /// `messages_total{outcome="delivered"}` per direction since the bridge started.
    public var deliveredToMQTT: Int
    public var deliveredToPusher: Int
    /// `buffered_messages`, both directions.
    public var buffered: Int
    /// `messages_total{outcome="dead_lettered"}`, both directions, since the bridge started.
    public var deadLetters: Int
    /// In a cluster: live members (this one included) and the channels this member holds; nil otherwise.
    public var cluster: (members: Int, channelsHeld: Int)?

    public init(
        mqttConnected: Bool = false, pusherConnected: Bool = false, deliveredToMQTT: Int = 0, deliveredToPusher: Int = 0,
        buffered: Int = 0, deadLetters: Int = 0, cluster: (members: Int, channelsHeld: Int)? = nil
    ) {
        self.mqttConnected = mqttConnected
        self.pusherConnected = pusherConnected
        self.deliveredToMQTT = deliveredToMQTT
        self.deliveredToPusher = deliveredToPusher
        self.buffered = buffered
        self.deadLetters = deadLetters
        self.cluster = cluster
    }

    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.mqttConnected == rhs.mqttConnected && lhs.pusherConnected == rhs.pusherConnected
            && lhs.deliveredToMQTT == rhs.deliveredToMQTT && lhs.deliveredToPusher == rhs.deliveredToPusher
            && lhs.buffered == rhs.buffered && lhs.deadLetters == rhs.deadLetters
            && lhs.cluster?.members == rhs.cluster?.members && lhs.cluster?.channelsHeld == rhs.cluster?.channelsHeld
    }
}

/// The retained state JSON (`<status topic>/state`, docs/contract.md §8.3) every entity of
/// ``HomeAssistantDevice`` reads one field of.
///
/// `{"mqtt_connected":true,"pusher_connected":true,"pusher_to_mqtt_per_second":12.5,
/// "mqtt_to_pusher_per_second":0,"buffered":0,"dead_letters":3}`, plus `"cluster_members"` and
/// `"channels_held"` in a cluster. Rates are messages delivered per second since the previous
/// state, to two decimals.
public struct HomeAssistantState: Sendable, Equatable {
    /// The field names, shared by the JSON and the entities' value templates.
    public enum Field {
        public static let mqttConnected = "mqtt_connected"
        public static let pusherConnected = "pusher_connected"
        public static let pusherToMQTTRate = "pusher_to_mqtt_per_second"
        public static let mqttToPusherRate = "mqtt_to_pusher_per_second"
        public static let buffered = "buffered"
        public static let deadLetters = "dead_letters"
        public static let clusterMembers = "cluster_members"
        public static let channelsHeld = "channels_held"
    }

    public var reading: HomeAssistantReading
    /// Messages per second, times 100 and rounded (two decimals without floating-point text).
    public var pusherToMQTTCentiRate: Int
    public var mqttToPusherCentiRate: Int

    /// The state for `reading`, with rates over the `elapsed` time since `previous` (zero rates
    /// without a previous reading, or when no time passed, or when a counter went back).
    public init(reading: HomeAssistantReading, previous: HomeAssistantReading?, elapsed: Duration) {
        self.reading = reading
        let (seconds, attoseconds) = elapsed.components
        let milliseconds = seconds * 1000 + attoseconds / 1_000_000_000_000_000
        func centiRate(_ now: Int, _ before: Int?) -> Int {
            guard let before, now >= before, milliseconds > 0 else { return 0 }
            // (count / ms) × 1000 × 100, rounded half up.
            return Int(((Int64(now - before) * 100_000 * 2 / milliseconds) + 1) / 2)
        }
        pusherToMQTTCentiRate = centiRate(reading.deliveredToMQTT, previous?.deliveredToMQTT)
        mqttToPusherCentiRate = centiRate(reading.deliveredToPusher, previous?.deliveredToPusher)
    }

    /// The JSON document, keys in a fixed order.
    public var json: String {
        var fields: [(String, String)] = [
            (Field.mqttConnected, "\(reading.mqttConnected)"),
            (Field.pusherConnected, "\(reading.pusherConnected)"),
            (Field.pusherToMQTTRate, Self.decimal(pusherToMQTTCentiRate)),
            (Field.mqttToPusherRate, Self.decimal(mqttToPusherCentiRate)),
            (Field.buffered, "\(reading.buffered)"),
            (Field.deadLetters, "\(reading.deadLetters)"),
        ]
        if let cluster = reading.cluster {
            fields.append((Field.clusterMembers, "\(cluster.members)"))
            fields.append((Field.channelsHeld, "\(cluster.channelsHeld)"))
        }
        return "{" + fields.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}"
    }

    /// `1250` → `12.5`, `7` → `0.07`, `300` → `3`: a JSON number with at most two decimals.
    static func decimal(_ centi: Int) -> String {
        let whole = centi / 100
        let fraction = centi % 100
        if fraction == 0 { return "\(whole)" }
        if fraction % 10 == 0 { return "\(whole).\(fraction / 10)" }
        return "\(whole).\(fraction < 10 ? "0" : "")\(fraction)"
    }
}
