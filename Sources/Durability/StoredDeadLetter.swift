/// One dead letter as the store keeps it (docs/contract.md §8.3 "Dead letters kept and redriven"):
/// who refused it and why, and the message itself — enough to route it again.
///
/// Durability does not know BridgeCore's `DeadLetter`; the daemon converts one into the other.
public struct StoredDeadLetter: Sendable, Equatable {
    /// Where the message came from: the fields a rule table routes on.
    public enum Message: Sendable, Equatable {
        /// An MQTT message (MQTT → Pusher).
        case mqtt(topic: String, qos: Int, retain: Bool)
        /// A Pusher event (Pusher → MQTT); `userID` is the sender of a client event, if any.
        case pusher(channel: String, event: String, userID: String?)
        /// An event on its way into Pusher that the Pusher API refused (code `rejected`): the
        /// MQTT message it came from is not known any more, the event is sent again as it was.
        case toPusher(channel: String, event: String)
    }

    /// The store's id, unique in the bridge's store and never reused (0 until the store assigns one).
    public var id: UInt64
    public var bridge: String
    public var rule: String
    /// `DeadLetterReason.code`: `invalid_channel`, `rejected`, …
    public var code: String
    /// The reason in words.
    public var reason: String
    /// When the message was dead-lettered (Unix ms).
    public var timeMillis: Int64
    public var message: Message
    /// The MQTT payload or the Pusher event data.
    public var payload: [UInt8]

    public init(
        id: UInt64 = 0, bridge: String, rule: String, code: String, reason: String, timeMillis: Int64, message: Message,
        payload: [UInt8]
    ) {
        self.id = id
        self.bridge = bridge
        self.rule = rule
        self.code = code
        self.reason = reason
        self.timeMillis = timeMillis
        self.message = message
        self.payload = payload
    }
}

/// The payload of one record in a dead-letter log (inside `SpoolRecordFormat`'s CRC-checked
/// frame), in `RecordWriter`'s fields. Version 1; a later version adds fields at the end.
///
/// | field | |
/// |---|---|
/// | version | 1 |
/// | kind | int: 1 letter, 2 removal, 3 next id |
/// | letter | id, bridge, rule, code, reason, time ms, source (0 MQTT, 1 Pusher, 2 event to Pusher), topic or channel, event, qos, retain, has user id, user id, payload |
/// | removal | count, then that many ids |
/// | next id | the id the next letter gets (written first by a compaction) |
/// | submitted | letter id, direction (0 Pusher → MQTT, 1 MQTT → Pusher), spool sequence |
enum DeadLetterRecord: Equatable {
    case letter(StoredDeadLetter)
    case removal([UInt64])
    case nextID(UInt64)
    /// A redrive put what the letter became in a spool: `direction` (0 Pusher → MQTT, 1 MQTT →
    /// Pusher) up to `sequence`. After a crash the daemon forgets the letter once that is settled.
    case submitted(id: UInt64, direction: UInt8, sequence: UInt64)

    static let version: UInt8 = 1

    func encoded() -> [UInt8] {
        switch self {
        case .letter(let letter):
            var writer = RecordWriter(version: Self.version, capacity: letter.payload.count + 160)
            writer.int(1)
            writer.int(Int64(bitPattern: letter.id))
            writer.string(letter.bridge)
            writer.string(letter.rule)
            writer.string(letter.code)
            writer.string(letter.reason)
            writer.int(letter.timeMillis)
            switch letter.message {
            case .mqtt(let topic, let qos, let retain):
                writer.int(0)
                writer.string(topic)
                writer.string("")
                writer.int(Int64(qos))
                writer.int(retain ? 1 : 0)
                writer.int(0)
                writer.string("")
            case .pusher(let channel, let event, let userID):
                writer.int(1)
                writer.string(channel)
                writer.string(event)
                writer.int(0)
                writer.int(0)
                writer.int(userID == nil ? 0 : 1)
                writer.string(userID ?? "")
            case .toPusher(let channel, let event):
                writer.int(2)
                writer.string(channel)
                writer.string(event)
                writer.int(0)
                writer.int(0)
                writer.int(0)
                writer.string("")
            }
            writer.bytes(letter.payload)
            return writer.output
        case .removal(let ids):
            var writer = RecordWriter(version: Self.version, capacity: 24 + ids.count * 8)
            writer.int(2)
            writer.int(Int64(ids.count))
            for id in ids { writer.int(Int64(bitPattern: id)) }
            return writer.output
        case .nextID(let id):
            var writer = RecordWriter(version: Self.version, capacity: 24)
            writer.int(3)
            writer.int(Int64(bitPattern: id))
            return writer.output
        case .submitted(let id, let direction, let sequence):
            var writer = RecordWriter(version: Self.version, capacity: 40)
            writer.int(4)
            writer.int(Int64(bitPattern: id))
            writer.int(Int64(direction))
            writer.int(Int64(bitPattern: sequence))
            return writer.output
        }
    }

    /// Nil for bytes this version cannot read (a damaged or foreign payload that passed the CRC).
    static func decode(_ bytes: [UInt8]) -> DeadLetterRecord? {
        var reader = RecordReader(bytes)
        guard reader.version() == version, let kind = reader.int() else { return nil }
        switch kind {
        case 1:
            guard let id = reader.int(), let bridge = reader.string(), let rule = reader.string(), let code = reader.string(),
                let reason = reader.string(), let time = reader.int(), let source = reader.int(), let name = reader.string(),
                let event = reader.string(), let qos = reader.int(), let retain = reader.int(), let hasUser = reader.int(),
                let user = reader.string(), let payload = reader.bytes()
            else { return nil }
            let message: StoredDeadLetter.Message
            switch source {
            case 0:
                guard (0...2).contains(qos) else { return nil }
                message = .mqtt(topic: name, qos: Int(qos), retain: retain != 0)
            case 1: message = .pusher(channel: name, event: event, userID: hasUser != 0 ? user : nil)
            case 2: message = .toPusher(channel: name, event: event)
            default: return nil
            }
            return .letter(
                StoredDeadLetter(
                    id: UInt64(bitPattern: id), bridge: bridge, rule: rule, code: code, reason: reason, timeMillis: time,
                    message: message, payload: payload))
        case 2:
            guard let count = reader.int(), count >= 0, count <= Int64(bytes.count / 8) else { return nil }
            var ids: [UInt64] = []
            ids.reserveCapacity(Int(count))
            for _ in 0..<count {
                guard let id = reader.int() else { return nil }
                ids.append(UInt64(bitPattern: id))
            }
            return .removal(ids)
        case 3:
            guard let id = reader.int() else { return nil }
            return .nextID(UInt64(bitPattern: id))
        case 4:
            guard let id = reader.int(), let direction = reader.int(), (0...1).contains(direction), let sequence = reader.int()
            else { return nil }
            return .submitted(id: UInt64(bitPattern: id), direction: UInt8(direction), sequence: UInt64(bitPattern: sequence))
        default:
            return nil
        }
    }
}
