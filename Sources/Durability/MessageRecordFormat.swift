import BridgeVocabulary
import MQTTVocabulary

/// The payload of a spool record as the daemon's outboxes write it: one message on its way to the
/// MQTT broker or into Pusher, with the time it reached the bridge. The spool itself
/// (``SpoolRecordFormat``) frames, checksums and sequences these bytes and knows nothing of them;
/// this is what a restart reads back, so the layout is fixed: version 1, fields written by
/// ``RecordWriter`` (a version byte, then per field a little-endian UInt32 length and bytes, strings
/// as UTF-8, or a little-endian Int64). A record that does not decode (truncated, another
/// version, the other direction's) gives `nil`, never a trap.
public enum MessageRecordFormat {
    // MARK: MQTT (Pusher → MQTT, presence mirror, dead letters)

    /// rule, topic, payload, qos, retain (0/1), `receivedAtMillis`, the user-property count, then
    /// each property's name and value.
    public static func encode(_ publish: MQTTPublish, receivedAtMillis: Int64) -> [UInt8] {
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

    /// What ``encode(_:receivedAtMillis:)-(MQTTPublish,_)`` wrote, or `nil`.
    public static func decodeMQTTPublish(_ bytes: [UInt8]) -> (publish: MQTTPublish, receivedAtMillis: Int64)? {
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
        return (
            MQTTPublish(rule: rule, topic: topic, payload: payload, qos: Int(qos), retain: retain != 0, userProperties: properties),
            received
        )
    }

    // MARK: Pusher (MQTT → Pusher)

    /// rule, channel, event, data, via (its raw value), `receivedAtMillis`.
    public static func encode(_ event: PusherEventPublish, receivedAtMillis: Int64) -> [UInt8] {
        // Sized once, as the MQTT record: a version byte, five 4-byte lengths, one 8-byte integer.
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

    /// What ``encode(_:receivedAtMillis:)-(PusherEventPublish,_)`` wrote, or `nil`.
    public static func decodePusherEvent(_ bytes: [UInt8]) -> (event: PusherEventPublish, receivedAtMillis: Int64)? {
        var reader = RecordReader(bytes)
        guard reader.version() == 1,
            let rule = reader.string(), let channel = reader.string(), let name = reader.string(),
            let data = reader.string(), let viaText = reader.string(), let via = PusherDelivery(rawValue: viaText),
            let received = reader.int(), reader.isAtEnd
        else { return nil }
        return (PusherEventPublish(rule: rule, channel: channel, event: name, data: data, via: via), received)
    }
}
