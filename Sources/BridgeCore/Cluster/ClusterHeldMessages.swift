import PusherProtocol

/// The channels a member is subscribed to, confirmed by Pusher, sent to `<membership_topic>/held/<instance>`
/// (not retained, QoS 1) — docs/contract.md §7.4, "held reports". Each message is one of:
/// - a part of a full snapshot: `{"instance":"a","incarnation":"5f0c…","seq":7,"part":1,"parts":3,"channels":[…]}`;
///   a snapshot of P parts takes the sequence numbers s…s+P-1, part i has s+i-1;
/// - a delta since the message before: `{"instance":"a","incarnation":"5f0c…","seq":8,"added":[…],"removed":[…]}`.
///
/// Every message also carries the sender's Pusher `socket_id` when it has one (`"socket_id":"1.2"`),
/// and stays within 64 KB (``ClusterHeldReport/messages(instance:incarnation:socketID:firstSequence:snapshot:)``
/// splits). `seq` counts up from 1 in each incarnation with no hole: a receiver that sees one
/// skipped has lost a message, treats the member's held set as unknown and asks for a snapshot
/// (``ClusterSnapshotRequest``). An old holder drops a channel it handed over once the new
/// holder's known set lists it (docs/contract.md §7.4, "handover").
public struct ClusterHeldReport: Sendable, Equatable {
    /// What one message says.
    public enum Content: Sendable, Equatable {
        /// Part `part` (from 1) of `parts` of a full snapshot.
        case snapshot(part: Int, parts: Int, channels: [String])
        /// The changes since the message before.
        case delta(added: [String], removed: [String])
    }

    /// The sender's instance name.
    public var instance: String
    /// The sender's incarnation: a report is believed only from the incarnation whose record is current.
    public var incarnation: String
    /// This message's number in the incarnation's sequence (from 1).
    public var sequence: UInt64
    /// The sender's Pusher `socket_id`, when connected: another member sending an event to one of
    /// its channels names it, so that Pusher leaves the holder out and the event does not come
    /// back to MQTT through it (docs/contract.md §7.4, "loops").
    public var socketID: String?
    public var content: Content

    public init(instance: String, incarnation: String, sequence: UInt64, socketID: String? = nil, content: Content) {
        self.instance = instance
        self.incarnation = incarnation
        self.sequence = sequence
        self.socketID = socketID
        self.content = content
    }

    /// A whole snapshot in one message with sequence number 1 (tests, and small sets).
    public init(instance: String, incarnation: String, channels: [String], socketID: String? = nil, sequence: UInt64 = 1) {
        self.init(
            instance: instance, incarnation: incarnation, sequence: sequence, socketID: socketID,
            content: .snapshot(part: 1, parts: 1, channels: channels))
    }

    /// The channels this message lists as held: a snapshot part's, or a delta's added ones.
    public var listedChannels: [String] {
        switch content {
        case .snapshot(_, _, let channels): channels
        case .delta(let added, _): added
        }
    }

    /// The JSON payload.
    public var payload: [UInt8] {
        var output = Self.header(instance: instance, incarnation: incarnation, sequence: sequence, socketID: socketID)
        switch content {
        case .snapshot(let part, let parts, let channels):
            output.append(contentsOf: Array("\"part\":\(part),\"parts\":\(parts),".utf8))
            ClusterPayload.appendList("channels", channels, to: &output)
        case .delta(let added, let removed):
            ClusterPayload.appendList("added", added, to: &output)
            output.append(UInt8(ascii: ","))
            ClusterPayload.appendList("removed", removed, to: &output)
        }
        output.append(UInt8(ascii: "}"))
        return output
    }

    /// `{"instance":…,"incarnation":…,"seq":N,` and the socket id.
    private static func header(instance: String, incarnation: String, sequence: UInt64, socketID: String?) -> [UInt8] {
        var text = "{\"instance\":\(JSONString.quoted(instance)),\"incarnation\":\(JSONString.quoted(incarnation)),\"seq\":\(sequence),"
        if let socketID { text += "\"socket_id\":\(JSONString.quoted(socketID))," }
        return Array(text.utf8)
    }

    /// Reads a payload received on `instance`'s held topic; nil when it is not one of its reports
    /// (bad JSON, a missing field, `seq` 0, a part outside 1…parts, both a snapshot and a delta).
    public init?(payload: some Collection<UInt8>, instance: String) {
        guard let fields = ClusterPayload.fields(of: payload), fields.strings["instance"] == instance,
            let incarnation = fields.strings["incarnation"], !incarnation.isEmpty,
            let sequence = fields.numbers["seq"].flatMap({ UInt64($0) }), sequence > 0
        else { return nil }
        let socketID = fields.strings["socket_id"].flatMap { $0.isEmpty ? nil : $0 }
        let content: Content
        if let channels = fields.stringArrays["channels"] {
            guard fields.stringArrays["added"] == nil, fields.stringArrays["removed"] == nil,
                let part = fields.numbers["part"].flatMap({ Int($0) }), let parts = fields.numbers["parts"].flatMap({ Int($0) }),
                part >= 1, part <= parts, parts <= 1_000_000
            else { return nil }
            content = .snapshot(part: part, parts: parts, channels: channels)
        } else if let added = fields.stringArrays["added"], let removed = fields.stringArrays["removed"] {
            content = .delta(added: added, removed: removed)
        } else {
            return nil
        }
        self.init(instance: instance, incarnation: incarnation, sequence: sequence, socketID: socketID, content: content)
    }

    /// The bytes a message's fixed part may take at most: the header with the longest numbers, the
    /// part fields, the list names and brackets.
    private static func overhead(instance: String, incarnation: String, socketID: String?) -> Int {
        header(instance: instance, incarnation: incarnation, sequence: .max, socketID: socketID).count
            + "\"part\":9999999,\"parts\":9999999,\"added\":[],\"removed\":[]}".utf8.count
    }

    /// A full snapshot of `channels` (sorted here) as parts of at most 64 KB each, numbered from `firstSequence`.
    public static func messages(
        instance: String, incarnation: String, socketID: String?, firstSequence: UInt64, snapshot channels: some Collection<String>
    ) -> [ClusterHeldReport] {
        let budget = ClusterPayload.maxBytes - overhead(instance: instance, incarnation: incarnation, socketID: socketID)
        let runs = ClusterPayload.chunks(channels.sorted(), budget: budget)
        return runs.enumerated().map { index, run in
            ClusterHeldReport(
                instance: instance, incarnation: incarnation, sequence: firstSequence + UInt64(index), socketID: socketID,
                content: .snapshot(part: index + 1, parts: runs.count, channels: Array(run)))
        }
    }

    /// The delta `added`/`removed` (sorted here) as messages of at most 64 KB each, numbered from
    /// `firstSequence`; the removals go first.
    public static func messages(
        instance: String, incarnation: String, socketID: String?, firstSequence: UInt64, added: some Collection<String>,
        removed: some Collection<String>
    ) -> [ClusterHeldReport] {
        let budget = ClusterPayload.maxBytes - overhead(instance: instance, incarnation: incarnation, socketID: socketID)
        let removedCount = removed.count
        let all = removed.sorted() + added.sorted()
        var offset = 0
        return ClusterPayload.chunks(all, budget: budget).enumerated().map { index, run in
            defer { offset += run.count }
            let split = min(max(removedCount - offset, 0), run.count)
            let content = Content.delta(added: Array(run.dropFirst(split)), removed: Array(run.prefix(split)))
            return ClusterHeldReport(
                instance: instance, incarnation: incarnation, sequence: firstSequence + UInt64(index), socketID: socketID,
                content: content)
        }
    }
}

/// A member asks another for a full snapshot of its held set, on `<membership_topic>/resync/<instance>`
/// (not retained, QoS 1): `{"instance":"b","incarnation":"7a1e…","from":"a"}`, `instance` and
/// `incarnation` naming the member asked. Sent when a receiver lost one of its held messages (a
/// hole in `seq`, or a heartbeat's `held_seq` it never received); the member asked sends one
/// snapshot for all such requests, at most one per `heartbeat_interval`.
public struct ClusterSnapshotRequest: Sendable, Equatable {
    /// The member asked.
    public var instance: String
    /// Its incarnation: a request for an earlier process of it is ignored.
    public var incarnation: String
    /// Who asks (for operators watching the topic).
    public var from: String

    public init(instance: String, incarnation: String, from: String) {
        self.instance = instance
        self.incarnation = incarnation
        self.from = from
    }

    /// The JSON payload.
    public var payload: [UInt8] {
        Array(
            ("{\"instance\":\(JSONString.quoted(instance)),\"incarnation\":\(JSONString.quoted(incarnation)),"
                + "\"from\":\(JSONString.quoted(from))}").utf8)
    }

    /// Reads a payload received on `instance`'s resync topic; nil when it is not a request to that instance.
    public init?(payload: some Collection<UInt8>, instance: String) {
        guard let fields = ClusterPayload.fields(of: payload), fields.strings["instance"] == instance,
            let incarnation = fields.strings["incarnation"], !incarnation.isEmpty, let from = fields.strings["from"]
        else { return nil }
        self.init(instance: instance, incarnation: incarnation, from: from)
    }
}
