import BridgeCore
import Durability

/// A message on its way to the MQTT broker (Pusher → MQTT, presence mirror, dead letters). Its
/// bytes in the outbox and the spool are Durability's ``MessageRecordFormat``.
struct OutgoingMQTT: OutboxItem, Equatable {
    /// What the rule table (or the presence mirror, or the dead-letter path) produced.
    var publish: MQTTPublish
    /// When the source message reached the bridge (Unix ms), for the delivery-time histogram.
    var receivedAtMillis: Int64

    func encoded() -> [UInt8] { MessageRecordFormat.encode(publish, receivedAtMillis: receivedAtMillis) }

    static func decode(_ bytes: [UInt8]) -> OutgoingMQTT? {
        guard let record = MessageRecordFormat.decodeMQTTPublish(bytes) else { return nil }
        return OutgoingMQTT(publish: record.publish, receivedAtMillis: record.receivedAtMillis)
    }
}

/// An event on its way into Pusher (MQTT → Pusher); its bytes are ``MessageRecordFormat``'s.
struct OutgoingPusher: OutboxItem, Equatable {
    var event: PusherEventPublish
    var receivedAtMillis: Int64

    func encoded() -> [UInt8] { MessageRecordFormat.encode(event, receivedAtMillis: receivedAtMillis) }

    static func decode(_ bytes: [UInt8]) -> OutgoingPusher? {
        guard let record = MessageRecordFormat.decodePusherEvent(bytes) else { return nil }
        return OutgoingPusher(event: record.event, receivedAtMillis: record.receivedAtMillis)
    }
}
