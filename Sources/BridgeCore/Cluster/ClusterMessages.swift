import PusherProtocol

/// The retained record a member keeps at `<membership_topic>/members/<instance>` (docs/contract.md
/// §7.4, "membership"): `{"instance":"a","incarnation":"5f0c…","started_at":1795000000123}`. Its
/// Last Will is the zero-length retained message on the same topic, which deletes it.
public struct ClusterMemberRecord: Sendable, Equatable {
    /// The member's instance name (the topic's last level says the same).
    public var instance: String
    /// A value chosen afresh by each process at start (random): tells a restarted member, or a
    /// second process with the same instance name, from the one before.
    public var incarnation: String
    /// When the process started, in milliseconds since 1970: of two processes with the same
    /// instance and client id, the older one gives way.
    public var startedAt: Int64
    /// The member's MQTT client id (`client_id-<instance>`), when known: two processes with the same
    /// instance *and* client id cannot both stay connected.
    public var clientID: String?

    public init(instance: String, incarnation: String, startedAt: Int64, clientID: String? = nil) {
        self.instance = instance
        self.incarnation = incarnation
        self.startedAt = startedAt
        self.clientID = clientID
    }

    /// The JSON payload.
    public var payload: [UInt8] {
        var text = "{\"instance\":\(JSONString.quoted(instance)),\"incarnation\":\(JSONString.quoted(incarnation)),"
        text += "\"started_at\":\(startedAt)"
        if let clientID { text += ",\"client_id\":\(JSONString.quoted(clientID))" }
        return Array((text + "}").utf8)
    }

    /// Reads a payload received on `instance`'s member topic; nil when it is not a record of that
    /// instance (bad JSON, a missing or empty field, another instance's name).
    public init?(payload: some Collection<UInt8>, instance: String) {
        guard let fields = ClusterPayload.fields(of: payload), fields.strings["instance"] == instance,
            let incarnation = fields.strings["incarnation"], !incarnation.isEmpty
        else { return nil }
        self.init(
            instance: instance, incarnation: incarnation, startedAt: fields.numbers["started_at"].flatMap { Int64($0) } ?? 0,
            clientID: fields.strings["client_id"])
    }
}

/// Whose Last Will deleted a record: the Will's user properties `incarnation` and `started_at`.
public struct ClusterWillOrigin: Sendable, Equatable {
    /// The incarnation of the process whose connection ended.
    public var incarnation: String
    /// When that process started, milliseconds since 1970 (0 when not said).
    public var startedAt: Int64

    public init(incarnation: String, startedAt: Int64) {
        self.incarnation = incarnation
        self.startedAt = startedAt
    }
}

/// A heartbeat, sent every `heartbeat_interval` to `<membership_topic>/heartbeat/<instance>`, not
/// retained, QoS 0: `{"instance":"a","incarnation":"5f0c…","seq":42}`.
public struct ClusterHeartbeat: Sendable, Equatable {
    /// The sender's instance name.
    public var instance: String
    /// The sender's incarnation: a different one under this member's own name is a duplicate.
    public var incarnation: String
    /// Counts up from 1 in each incarnation (for operators watching the topic).
    public var sequence: UInt64

    public init(instance: String, incarnation: String, sequence: UInt64) {
        self.instance = instance
        self.incarnation = incarnation
        self.sequence = sequence
    }

    /// The JSON payload.
    public var payload: [UInt8] {
        Array("{\"instance\":\(JSONString.quoted(instance)),\"incarnation\":\(JSONString.quoted(incarnation)),\"seq\":\(sequence)}".utf8)
    }

    /// Reads a payload received on `instance`'s heartbeat topic; nil when it is not one of its heartbeats.
    public init?(payload: some Collection<UInt8>, instance: String) {
        guard let fields = ClusterPayload.fields(of: payload), fields.strings["instance"] == instance,
            let incarnation = fields.strings["incarnation"], !incarnation.isEmpty
        else { return nil }
        self.init(instance: instance, incarnation: incarnation, sequence: fields.numbers["seq"].flatMap { UInt64($0) } ?? 0)
    }
}

/// The channels a member is subscribed to, confirmed by Pusher, sent to `<membership_topic>/held/<instance>`
/// (not retained) whenever that set changes: `{"instance":"a","incarnation":"5f0c…","channels":["c1","c2"]}`.
/// An old holder drops a channel it handed over once the new holder lists it (docs/contract.md §7.4, "handover").
public struct ClusterHeldReport: Sendable, Equatable {
    /// The sender's instance name.
    public var instance: String
    /// The sender's incarnation: a report is believed only from the incarnation whose record is current.
    public var incarnation: String
    /// The channels, sorted.
    public var channels: [String]
    /// The sender's Pusher `socket_id`, when connected: another member sending an event to one of
    /// these channels names it, so that Pusher leaves the holder out and the event does not come
    /// back to MQTT through it (docs/contract.md §7.4, "loops").
    public var socketID: String?

    public init(instance: String, incarnation: String, channels: [String], socketID: String? = nil) {
        self.instance = instance
        self.incarnation = incarnation
        self.channels = channels
        self.socketID = socketID
    }

    /// The JSON payload.
    public var payload: [UInt8] {
        var output = Array("{\"instance\":\(JSONString.quoted(instance)),\"incarnation\":\(JSONString.quoted(incarnation)),".utf8)
        if let socketID { output.append(contentsOf: Array("\"socket_id\":\(JSONString.quoted(socketID)),".utf8)) }
        ClusterPayload.appendChannels(channels, to: &output)
        return output
    }

    /// Reads a payload received on `instance`'s held topic; nil when it is not one of its reports.
    public init?(payload: some Collection<UInt8>, instance: String) {
        guard let fields = ClusterPayload.fields(of: payload), fields.strings["instance"] == instance,
            let incarnation = fields.strings["incarnation"], !incarnation.isEmpty, let channels = fields.stringArrays["channels"]
        else { return nil }
        let socketID = fields.strings["socket_id"].flatMap { $0.isEmpty ? nil : $0 }
        self.init(instance: instance, incarnation: incarnation, channels: channels, socketID: socketID)
    }
}

/// The channels a prefix rule's discovery holds for the whole group, sent retained to
/// `<membership_topic>/discovered/<rule>` by the member that runs the rule's discovery (docs/contract.md
/// §7.4, "discovery"): `{"rule":"sensors","channels":["sensor-1","sensor-2"]}`. Every member wants
/// these channels held; the retained list outlives its sender, so a new owner starts from it.
public struct ClusterDiscoveredList: Sendable, Equatable {
    /// The rule's name (`presence:<prefix>` for a presence mirror with `channel_prefix`).
    public var rule: String
    /// The channels, sorted.
    public var channels: [String]

    public init(rule: String, channels: [String]) {
        self.rule = rule
        self.channels = channels
    }

    /// The JSON payload.
    public var payload: [UInt8] {
        var output = Array("{\"rule\":\(JSONString.quoted(rule)),".utf8)
        ClusterPayload.appendChannels(channels, to: &output)
        return output
    }

    /// Reads a payload received on `rule`'s discovered topic; nil when it is not that rule's list.
    public init?(payload: some Collection<UInt8>, rule: String) {
        guard let fields = ClusterPayload.fields(of: payload), fields.strings["rule"] == rule,
            let channels = fields.stringArrays["channels"]
        else { return nil }
        self.init(rule: rule, channels: channels)
    }
}

/// The flat JSON objects of the cluster messages, read with the project's one JSON grammar
/// (`PusherProtocol.JSONTokenizer`). Members of other types, and unknown members, are ignored, so
/// a later version may add fields.
enum ClusterPayload {
    /// The string, number and string-array members of one object.
    struct Fields {
        var strings: [String: String] = [:]
        var numbers: [String: String] = [:]
        var stringArrays: [String: [String]] = [:]
    }

    /// Ends an object with `"channels":[…]}`.
    static func appendChannels(_ channels: [String], to output: inout [UInt8]) {
        output.append(contentsOf: Array("\"channels\":[".utf8))
        for (index, channel) in channels.enumerated() {
            if index > 0 { output.append(UInt8(ascii: ",")) }
            JSONString.append(channel, to: &output)
        }
        output.append(contentsOf: Array("]}".utf8))
    }

    /// The members of `payload`, or nil when it is not one JSON object.
    static func fields(of payload: some Collection<UInt8>) -> Fields? {
        let result = try? JSONTokenizer.withTokenizer(over: payload) {
            (tokenizer: inout JSONTokenizer) throws(JSONSyntaxError) -> Fields? in
            guard let first = try tokenizer.next(), first.kind == .beginObject else { return nil }
            var fields = Fields()
            while let token = try tokenizer.next(), token.kind == .memberName {
                let name = tokenizer.string(of: token)
                guard let value = try tokenizer.next() else { return nil }
                switch value.kind {
                case .string: fields.strings[name] = tokenizer.string(of: value)
                case .number: fields.numbers[name] = tokenizer.text(of: value.range)
                case .beginArray:
                    var strings: [String]? = []
                    while let element = try tokenizer.next(), element.kind != .endArray {
                        if element.kind == .string {
                            strings?.append(tokenizer.string(of: element))
                        } else {
                            strings = nil
                            _ = try tokenizer.skipValue(startingWith: element)
                        }
                    }
                    if let strings { fields.stringArrays[name] = strings }
                default: _ = try tokenizer.skipValue(startingWith: value)
                }
            }
            try tokenizer.validateDocument()
            return fields
        }
        return result ?? nil
    }
}
