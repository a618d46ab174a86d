import BridgeVocabulary
import MQTTVocabulary

/// A message that matched a rule but cannot be delivered: count it, log it (rate-limited) and,
/// when `dead_letter_topic` is set, publish ``jsonPayload`` there (docs/contract.md §5.2).
public struct DeadLetter: Sendable, Equatable {
    public var rule: String
    public var reason: DeadLetterReason
    public var source: MessageSource
    /// The original payload or event data.
    public var payload: [UInt8]
    /// What else the rule table routes on, kept so a redrive routes the message as it came
    /// (docs/contract.md §8.3): the MQTT QoS and retain flag, the sender of a client event.
    public var qos: Int
    public var retain: Bool
    public var userID: String?

    public init(
        rule: String, reason: DeadLetterReason, source: MessageSource, payload: [UInt8], qos: Int = 0, retain: Bool = false,
        userID: String? = nil
    ) {
        self.rule = rule
        self.reason = reason
        self.source = source
        self.payload = payload
        self.qos = qos
        self.retain = retain
        self.userID = userID
    }

    /// `{"reason","rule","source","payload"}`: `source` is `{"mqtt_topic"}` or
    /// `{"pusher_channel","pusher_event"}`; a payload that is not UTF-8 is given as
    /// `payload_base64` instead of `payload`.
    public var jsonPayload: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(payload.count + 128)
        out.append(contentsOf: "{\"reason\":".utf8)
        JSONText.appendString(reason.description, to: &out)
        out.append(contentsOf: ",\"code\":".utf8)
        JSONText.appendString(reason.code, to: &out)
        out.append(contentsOf: ",\"rule\":".utf8)
        JSONText.appendString(rule, to: &out)
        switch source {
        case .mqtt(let topic):
            out.append(contentsOf: ",\"source\":{\"mqtt_topic\":".utf8)
            JSONText.appendString(topic, to: &out)
        case .pusher(let channel, let event):
            out.append(contentsOf: ",\"source\":{\"pusher_channel\":".utf8)
            JSONText.appendString(channel, to: &out)
            out.append(contentsOf: ",\"pusher_event\":".utf8)
            JSONText.appendString(event, to: &out)
        }
        out.append(UInt8(ascii: "}"))
        if let text = String(validating: payload, as: UTF8.self) {
            out.append(contentsOf: ",\"payload\":".utf8)
            JSONText.appendString(text, to: &out)
        } else {
            out.append(contentsOf: ",\"payload_base64\":\"".utf8)
            out.append(contentsOf: Array(Base64.encode(payload).utf8))
            out.append(UInt8(ascii: "\""))
        }
        out.append(UInt8(ascii: "}"))
        return out
    }
}
