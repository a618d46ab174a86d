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
/// retained, QoS 0: `{"instance":"a","incarnation":"5f0c…","seq":42,"held_seq":17}`. `held_seq` is
/// the sequence number of the last held message sent (``ClusterHeldReport``): a receiver that has
/// not seen it one heartbeat later lost a message and asks for a snapshot.
public struct ClusterHeartbeat: Sendable, Equatable {
    /// The sender's instance name.
    public var instance: String
    /// The sender's incarnation: a different one under this member's own name is a duplicate.
    public var incarnation: String
    /// Counts up from 1 in each incarnation (for operators watching the topic).
    public var sequence: UInt64
    /// The sequence number of the last held message this incarnation sent (0: none yet).
    public var heldSequence: UInt64
    /// Whether the sender is not active yet (listening after a connect): `"observing":1`. The
    /// partition mode does not count it as sending its channels (ClusterMembership.sendingMembers).
    public var observing: Bool

    public init(instance: String, incarnation: String, sequence: UInt64, heldSequence: UInt64 = 0, observing: Bool = false) {
        self.instance = instance
        self.incarnation = incarnation
        self.sequence = sequence
        self.heldSequence = heldSequence
        self.observing = observing
    }

    /// The JSON payload.
    public var payload: [UInt8] {
        Array(
            ("{\"instance\":\(JSONString.quoted(instance)),\"incarnation\":\(JSONString.quoted(incarnation)),\"seq\":\(sequence),"
                + "\"held_seq\":\(heldSequence)" + (observing ? ",\"observing\":1}" : "}")).utf8)
    }

    /// Reads a payload received on `instance`'s heartbeat topic; nil when it is not one of its heartbeats.
    public init?(payload: some Collection<UInt8>, instance: String) {
        guard let fields = ClusterPayload.fields(of: payload), fields.strings["instance"] == instance,
            let incarnation = fields.strings["incarnation"], !incarnation.isEmpty
        else { return nil }
        self.init(
            instance: instance, incarnation: incarnation, sequence: fields.numbers["seq"].flatMap { UInt64($0) } ?? 0,
            heldSequence: fields.numbers["held_seq"].flatMap { UInt64($0) } ?? 0, observing: fields.numbers["observing"] == "1")
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

    /// The largest payload a membership message may have: 64 KB (issue 31: a broker or a client
    /// with a small `message_size_limit` must still carry every message). Long lists are split.
    static let maxBytes = 65_536

    /// Appends `"name":["a","b"]`.
    static func appendList(_ name: String, _ channels: some Collection<String>, to output: inout [UInt8]) {
        output.append(contentsOf: Array("\"\(name)\":[".utf8))
        var first = true
        for channel in channels {
            if !first { output.append(UInt8(ascii: ",")) }
            first = false
            JSONString.append(channel, to: &output)
        }
        output.append(UInt8(ascii: "]"))
    }

    /// The bytes `channel` takes in a list at most: its JSON string and a comma.
    static func listedSize(_ channel: String) -> Int {
        var size = 3  // the quotes and the comma
        for byte in channel.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"): size += 2
            case ..<0x20: size += 6  // `\u00XX` at most
            default: size += 1
            }
        }
        return size
    }

    /// Splits `channels` into runs whose listed size stays within `budget` bytes (at least one
    /// channel a run, and at least one run).
    static func chunks(_ channels: [String], budget: Int) -> [ArraySlice<String>] {
        var runs: [ArraySlice<String>] = []
        var start = 0
        var used = 0
        for (index, channel) in channels.enumerated() {
            let size = listedSize(channel)
            if index > start, used + size > budget {
                runs.append(channels[start..<index])
                start = index
                used = 0
            }
            used += size
        }
        runs.append(channels[start...])
        return runs
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
