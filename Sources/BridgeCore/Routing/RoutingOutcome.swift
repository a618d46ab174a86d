import MQTTVocabulary

/// An event to publish into Pusher, produced by an MQTT → Pusher rule.
public struct PusherEventPublish: Sendable, Equatable {
    /// The rule that produced it.
    public var rule: String
    /// The rendered, validated channel name.
    public var channel: String
    /// The rendered, validated event name.
    public var event: String
    /// The event's `data` (docs/contract.md §5.1), at most `max_event_bytes`.
    public var data: String
    /// HTTP API or client event.
    public var via: PusherDelivery

    public init(rule: String, channel: String, event: String, data: String, via: PusherDelivery) {
        self.rule = rule
        self.channel = channel
        self.event = event
        self.data = data
        self.via = via
    }
}

/// A message to publish to MQTT, produced by a Pusher → MQTT rule.
public struct MQTTPublish: Sendable, Equatable {
    /// The rule that produced it.
    public var rule: String
    /// The rendered, escaped topic.
    public var topic: String
    /// The payload bytes.
    public var payload: [UInt8]
    public var qos: Int
    public var retain: Bool
    /// `pusher-channel`, `pusher-event`, `pusher-user-id` — only when the bridge speaks MQTT 5.
    public var userProperties: [MQTTUserProperty]

    public init(rule: String, topic: String, payload: [UInt8], qos: Int, retain: Bool, userProperties: [MQTTUserProperty] = []) {
        self.rule = rule
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retain = retain
        self.userProperties = userProperties
    }
}

/// Why a message matched by a rule cannot be delivered (docs/contract.md §5.2).
public enum DeadLetterReason: Sendable, Equatable, CustomStringConvertible {
    /// The rendered channel name breaks Pusher's channel-name rules.
    case invalidChannelName(String, problem: String)
    /// The rendered event name is too long or reserved.
    case invalidEventName(String, problem: String)
    /// The rendered topic cannot be published to.
    case invalidTopic(String, problem: String)
    /// The event data is larger than `max_event_bytes`.
    case dataTooLarge(bytes: Int, limit: Int)
    /// The MQTT payload is not UTF-8, so it cannot become Pusher event data.
    case invalidUTF8
    /// A placeholder has no value for this message (e.g. `{user_id}` on an event without a sender).
    case missingPlaceholderValue(String)
    /// A `{json:…}` placeholder or a `payload = "json:…"` projection found nothing usable at this
    /// pointer: missing, null, an object or array (in a name), or a payload that is not JSON (§7.3).
    case templateValueMissing(pointer: String, usage: String)
    /// The Pusher HTTP API refused the event (4xx other than 429); reported by the daemon.
    case rejectedByPusher(status: Int, body: String)

    /// A short stable label, for metrics (`outcome`) and log metadata.
    public var code: String {
        switch self {
        case .invalidChannelName: "invalid_channel"
        case .invalidEventName: "invalid_event"
        case .invalidTopic: "invalid_topic"
        case .dataTooLarge: "too_large"
        case .invalidUTF8: "invalid_utf8"
        case .missingPlaceholderValue: "missing_value"
        case .templateValueMissing: "template_value_missing"
        case .rejectedByPusher: "rejected"
        }
    }

    public var description: String {
        switch self {
        case .invalidChannelName(let name, let problem): "rendered channel \"\(name)\" is invalid: \(problem)"
        case .invalidEventName(let name, let problem): "rendered event \"\(name)\" is invalid: \(problem)"
        case .invalidTopic(let topic, let problem): "rendered topic \"\(topic)\" is invalid: \(problem)"
        case .dataTooLarge(let bytes, let limit): "event data is \(bytes) bytes, over max_event_bytes (\(limit))"
        case .invalidUTF8: "payload is not valid UTF-8"
        case .missingPlaceholderValue(let placeholder): "the message has no value for {\(placeholder)}"
        case .templateValueMissing(let pointer, let usage):
            "the payload has no usable value at JSON Pointer \"\(pointer)\" for \(usage) (missing, null, not a scalar, or not JSON)"
        case .rejectedByPusher(let status, let body): "Pusher HTTP API answered \(status): \(body)"
        }
    }
}

/// Where an undeliverable message came from.
public enum MessageSource: Sendable, Equatable, CustomStringConvertible {
    /// An MQTT message on this topic.
    case mqtt(topic: String)
    /// A Pusher event on this channel.
    case pusher(channel: String, event: String)

    public var description: String {
        switch self {
        case .mqtt(let topic): "mqtt topic \"\(topic)\""
        case .pusher(let channel, let event): "pusher channel \"\(channel)\" event \"\(event)\""
        }
    }
}

/// A message that matched a rule but cannot be delivered: count it, log it (rate-limited) and,
/// when `dead_letter_topic` is set, publish ``jsonPayload`` there (docs/contract.md §5.2).
public struct DeadLetter: Sendable, Equatable {
    public var rule: String
    public var reason: DeadLetterReason
    public var source: MessageSource
    /// The original payload or event data.
    public var payload: [UInt8]

    public init(rule: String, reason: DeadLetterReason, source: MessageSource, payload: [UInt8]) {
        self.rule = rule
        self.reason = reason
        self.source = source
        self.payload = payload
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

/// A rule that matched but deliberately did not forward (not an error, not dead-lettered).
public struct SkippedMatch: Sendable, Equatable {
    public var rule: String
    /// Why, in words (e.g. retained messages are not forwarded).
    public var reason: String
    public init(rule: String, reason: String) {
        self.rule = rule
        self.reason = reason
    }
}

/// What the rule table decided for one MQTT message.
public struct MQTTMessageRouting: Sendable, Equatable {
    /// Events to publish into Pusher, in rule order.
    public var events: [PusherEventPublish] = []
    /// Matches that cannot be delivered.
    public var deadLetters: [DeadLetter] = []
    /// Matches deliberately not forwarded.
    public var skipped: [SkippedMatch] = []
    /// Rules whose filter matched but whose `where` did not (outcome `filtered`).
    public var filtered: [String] = []
    public init() {}
    /// Whether no rule matched at all.
    public var isUnmatched: Bool { events.isEmpty && deadLetters.isEmpty && skipped.isEmpty && filtered.isEmpty }
}

/// What the rule table decided for one Pusher event.
public struct PusherEventRouting: Sendable, Equatable {
    /// Messages to publish to MQTT, in rule order.
    public var publishes: [MQTTPublish] = []
    /// Matches that cannot be delivered.
    public var deadLetters: [DeadLetter] = []
    /// Rules that took the event but whose `where` did not match (outcome `filtered`).
    public var filtered: [String] = []
    public init() {}
    /// Whether no rule matched at all.
    public var isUnmatched: Bool { publishes.isEmpty && deadLetters.isEmpty && filtered.isEmpty }
}

/// Standard base64 (RFC 4648 §4), for dead-letter payloads that are not UTF-8.
enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var index = 0
        while index + 2 < bytes.count {
            let value = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index + 2])
            for shift in [18, 12, 6, 0] { out.append(alphabet[Int(value >> UInt32(shift) & 63)]) }
            index += 3
        }
        let rest = bytes.count - index
        if rest > 0 {
            var value = UInt32(bytes[index]) << 16
            if rest == 2 { value |= UInt32(bytes[index + 1]) << 8 }
            out.append(alphabet[Int(value >> 18 & 63)])
            out.append(alphabet[Int(value >> 12 & 63)])
            out.append(rest == 2 ? alphabet[Int(value >> 6 & 63)] : UInt8(ascii: "="))
            out.append(UInt8(ascii: "="))
        }
        return String(decoding: out, as: UTF8.self)
    }
}
