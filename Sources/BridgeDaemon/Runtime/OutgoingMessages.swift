import BridgeCore
import Durability
import MQTTVocabulary

/// A message on its way to the MQTT broker (Pusher → MQTT, presence mirror, dead letters).
struct OutgoingMQTT: OutboxItem, Equatable {
    /// What the rule table (or the presence mirror, or the dead-letter path) produced.
    var publish: MQTTPublish
    /// When the source message reached the bridge (Unix ms), for the delivery-time histogram.
    var receivedAtMillis: Int64

    func encoded() -> [UInt8] {
        // Sized once: a version byte, 4-byte lengths, 8-byte integers.
        var capacity = 1 + 3 * 4 + publish.rule.utf8.count + publish.topic.utf8.count + publish.payload.count + 4 * 8
        for property in publish.userProperties { capacity += 8 + property.name.utf8.count + property.value.utf8.count }
        var writer = RecordWriter(version: 1, capacity: capacity)
        writer.string(publish.rule)
        writer.string(publish.topic)
        writer.bytes(publish.payload)
        writer.int(Int64(publish.qos))
        writer.int(publish.retain ? 1 : 0)
        writer.int(receivedAtMillis)
        writer.int(Int64(publish.userProperties.count))
        for property in publish.userProperties {
            writer.string(property.name)
            writer.string(property.value)
        }
        return writer.output
    }

    static func decode(_ bytes: [UInt8]) -> OutgoingMQTT? {
        var reader = RecordReader(bytes)
        guard reader.version() == 1,
            let rule = reader.string(), let topic = reader.string(), let payload = reader.bytes(),
            let qos = reader.int(), let retain = reader.int(), let received = reader.int(),
            let propertyCount = reader.int(), propertyCount >= 0, propertyCount < 1000
        else { return nil }
        var properties: [MQTTUserProperty] = []
        for _ in 0..<propertyCount {
            guard let name = reader.string(), let value = reader.string() else { return nil }
            properties.append(.init(name, value))
        }
        guard reader.isAtEnd else { return nil }
        return OutgoingMQTT(
            publish: MQTTPublish(
                rule: rule, topic: topic, payload: payload, qos: Int(qos), retain: retain != 0, userProperties: properties),
            receivedAtMillis: received
        )
    }
}

/// An event on its way into Pusher (MQTT → Pusher).
struct OutgoingPusher: OutboxItem, Equatable {
    var event: PusherEventPublish
    var receivedAtMillis: Int64

    func encoded() -> [UInt8] {
        // Sized once, as OutgoingMQTT's: a version byte, five 4-byte lengths, one 8-byte integer.
        let capacity =
            1 + 5 * 4 + event.rule.utf8.count + event.channel.utf8.count + event.event.utf8.count + event.data.utf8.count
            + event.via.rawValue.utf8.count + 8
        var writer = RecordWriter(version: 1, capacity: capacity)
        writer.string(event.rule)
        writer.string(event.channel)
        writer.string(event.event)
        writer.string(event.data)
        writer.string(event.via.rawValue)
        writer.int(receivedAtMillis)
        return writer.output
    }

    static func decode(_ bytes: [UInt8]) -> OutgoingPusher? {
        var reader = RecordReader(bytes)
        guard reader.version() == 1,
            let rule = reader.string(), let channel = reader.string(), let name = reader.string(),
            let data = reader.string(), let viaText = reader.string(), let via = PusherDelivery(rawValue: viaText),
            let received = reader.int(), reader.isAtEnd
        else { return nil }
        return OutgoingPusher(
            event: PusherEventPublish(rule: rule, channel: channel, event: name, data: data, via: via), receivedAtMillis: received)
    }
}

/// Length-prefixed fields: a version byte, then per field a little-endian UInt32 length and bytes
/// (strings as UTF-8) or a little-endian Int64.
struct RecordWriter {
    private(set) var output: [UInt8] = []

    /// `capacity`: the record's expected size (one allocation when it is right).
    init(version: UInt8, capacity: Int = 128) {
        output.reserveCapacity(capacity)
        output.append(version)
    }

    mutating func bytes(_ value: [UInt8]) {
        length(value.count)
        output.append(contentsOf: value)
    }

    mutating func string(_ value: String) {
        var value = value
        value.withUTF8 { utf8 in
            length(utf8.count)
            output.append(contentsOf: utf8)
        }
    }

    mutating func int(_ value: Int64) {
        let bits = UInt64(bitPattern: value)
        for shift in stride(from: 0, to: 64, by: 8) { output.append(UInt8(truncatingIfNeeded: bits >> UInt64(shift))) }
    }

    /// A field's length: little-endian UInt32.
    private mutating func length(_ count: Int) {
        let bits = UInt32(truncatingIfNeeded: count)
        for shift in stride(from: 0, to: 32, by: 8) { output.append(UInt8(truncatingIfNeeded: bits >> UInt32(shift))) }
    }
}

/// Reads what ``RecordWriter`` wrote; every read returns `nil` past the end instead of trapping.
struct RecordReader {
    private let input: [UInt8]
    private var offset = 0

    init(_ input: [UInt8]) { self.input = input }

    var isAtEnd: Bool { offset == input.count }

    mutating func version() -> UInt8? {
        guard offset < input.count else { return nil }
        defer { offset += 1 }
        return input[offset]
    }

    mutating func bytes() -> [UInt8]? {
        guard let length = fixedWidth(UInt32.self) else { return nil }
        let count = Int(length)
        guard count <= input.count - offset else { return nil }
        defer { offset += count }
        return Array(input[offset..<offset + count])
    }

    mutating func string() -> String? {
        guard let raw = bytes() else { return nil }
        return String(validating: raw, as: UTF8.self)
    }

    mutating func int() -> Int64? { fixedWidth(Int64.self) }

    private mutating func fixedWidth<T: FixedWidthInteger>(_: T.Type) -> T? {
        let size = MemoryLayout<T>.size
        guard input.count - offset >= size else { return nil }
        var value: T = 0
        withUnsafeMutableBytes(of: &value) { raw in
            for i in 0..<size { raw[i] = input[offset + i] }
        }
        offset += size
        return T(littleEndian: value)
    }
}
