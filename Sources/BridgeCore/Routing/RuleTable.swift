import BridgeVocabulary
import MQTTVocabulary
import PusherProtocol

/// One bridge's rules, compiled for the per-message path (docs/contract.md §4, §5.1, §5.2).
///
/// - MQTT → Pusher: a ``TopicTrie`` over the rules' filters finds every matching rule with its
///   captures; the channel and event templates are rendered without escaping and validated
///   against Pusher's name rules; the payload becomes `data` (UTF-8 text or an envelope).
/// - Pusher → MQTT: an index from channel to rules, then the rules with a `channel_prefix` whose
///   prefix the channel starts with (docs/contract.md §7.1; `{suffix}` is the rest of the name);
///   the topic template is rendered with per-level escaping; the payload is `data` byte for byte
///   or an envelope.
///
/// Pure and `Sendable`: build it once per config, share it between tasks. Nothing here reads
/// the clock; pass `receivedAt`.
public struct RuleTable: Sendable {
    /// The bridge's name (`{bridge}`, envelopes).
    public let bridge: String
    /// MQTT → Pusher rules, in file order (trie values index into this).
    public let mqttRules: [MQTTToPusherRule]
    /// Pusher → MQTT rules, in file order.
    public let pusherRules: [PusherToMQTTRule]
    /// Event data larger than this is dead-lettered.
    public let maxEventBytes: Int
    /// Whether publishes carry MQTT 5 user properties.
    public let userProperties: Bool

    private let trie: TopicTrie
    private let rulesByChannel: [String: [Int]]
    /// Rules with a `channel_prefix`, in file order: (prefix, rule index).
    private let prefixRules: [(prefix: String, rule: Int)]
    /// Every JSON Pointer each rule reads (`where`, `{json:…}`, `json:` projection), by rule
    /// index: looked up in one pass over the payload before the rule is evaluated.
    private let mqttRulePointers: [[JSONPointer]]
    private let pusherRulePointers: [[JSONPointer]]

    /// Compiles `bridge`'s rules.
    public init(bridge: BridgeSettings) {
        self.bridge = bridge.name
        self.mqttRules = bridge.mqttToPusherRules
        self.pusherRules = bridge.pusherToMQTTRules
        self.maxEventBytes = bridge.pusher.maxEventBytes
        self.userProperties = bridge.mqtt.protocolVersion == .v5
        var trie = TopicTrie()
        for (index, rule) in mqttRules.enumerated() { trie.insert(rule.filter, rule: index) }
        self.trie = trie
        var byChannel: [String: [Int]] = [:]
        var prefixed: [(prefix: String, rule: Int)] = []
        for (index, rule) in pusherRules.enumerated() {
            if let prefix = rule.channelPrefix {
                prefixed.append((prefix, index))
            } else {
                byChannel[rule.channel, default: []].append(index)
            }
        }
        self.rulesByChannel = byChannel
        self.prefixRules = prefixed
        self.mqttRulePointers = mqttRules.map { rule in
            Self.unique(
                (rule.conditions.condition?.pointers ?? []) + rule.channel.jsonPointers + rule.event.jsonPointers
                    + (rule.payload.projectionPointer.map { [$0] } ?? []))
        }
        self.pusherRulePointers = pusherRules.map { rule in
            Self.unique(
                (rule.conditions.condition?.pointers ?? []) + rule.topic.jsonPointers + (rule.payload.projectionPointer.map { [$0] } ?? []))
        }
    }

    private static func unique(_ pointers: [JSONPointer]) -> [JSONPointer] {
        var seen = Set<JSONPointer>()
        return pointers.filter { seen.insert($0).inserted }
    }

    // MARK: MQTT → Pusher

    /// Routes one MQTT message: which events to publish into Pusher, what to dead-letter.
    ///
    /// - Parameters:
    ///   - retain: the retain flag as delivered. A retained message is skipped by rules without
    ///     `forward_retained` (with MQTT 3.1.1 there is no retain handling on subscribe, so this
    ///     check is what keeps retained state from being replayed into Pusher).
    public func route(topic: String, payload: [UInt8], qos: Int, retain: Bool, receivedAt: UTCTimestamp) -> MQTTMessageRouting {
        var matches: [(rule: Int, captures: [Substring], multiLevel: Substring?)] = []
        trie.match(topic) { rule, captures, multiLevel in matches.append((rule, captures, multiLevel)) }
        var routing = MQTTMessageRouting()
        guard !matches.isEmpty else { return routing }
        if matches.count > 1 { matches.sort { $0.rule < $1.rule } }

        // Decoded lazily and once per message, shared by all matching rules.
        var text: String??
        var envelope: String?
        var document: PayloadDocument?
        for match in matches {
            let rule = mqttRules[match.rule]
            if retain, !rule.forwardRetained {
                routing.skipped.append(SkippedMatch(rule: rule.name, reason: "retained message; forward_retained = false"))
                continue
            }
            func deadLetter(_ reason: DeadLetterReason) {
                routing.deadLetters.append(
                    DeadLetter(
                        rule: rule.name, reason: reason, source: .mqtt(topic: topic), payload: payload, qos: qos, retain: retain))
            }
            let pointers = mqttRulePointers[match.rule]
            if !pointers.isEmpty {
                if document == nil { document = PayloadDocument(payload) }
                document!.prefetch(pointers)
            }
            if let condition = rule.conditions.condition, !condition.matches(&document!) {
                routing.filtered.append(rule.name)
                continue
            }
            let values = TemplateValues(
                captures: match.captures, multiLevel: match.multiLevel, topic: Substring(topic), bridge: Substring(bridge))
            var channel = ""
            if let gap = rule.channel.render(into: &channel, values: values, payload: &document, escapingLevels: false) {
                deadLetter(Self.reason(gap, in: "the channel template"))
                continue
            }
            if rule.target == .channel {
                if let problem = ChannelName.problem(with: channel) {
                    deadLetter(.invalidChannelName(channel, problem: problem))
                    continue
                }
            } else {
                // `to_user`, `terminate_user`: the rendered user id (docs/contract.md §8.2).
                if let problem = UserID.problem(with: channel) {
                    deadLetter(.invalidUserID(channel, problem: problem))
                    continue
                }
                channel = UserID.serverToUserChannel(channel)
                if rule.target == .terminateUser {
                    routing.events.append(
                        PusherEventPublish(
                            rule: rule.name, channel: channel, event: PusherEventPublish.terminateUserEvent, data: "", via: .http))
                    continue
                }
            }
            var event = ""
            if let gap = rule.event.render(into: &event, values: values, payload: &document, escapingLevels: false) {
                deadLetter(Self.reason(gap, in: "the event template"))
                continue
            }
            if let problem = EventName.problem(with: event) {
                deadLetter(.invalidEventName(event, problem: problem))
                continue
            }
            if text == nil { text = .some(String(validating: payload, as: UTF8.self)) }
            guard let payloadText = text ?? nil else {
                deadLetter(.invalidUTF8)
                continue
            }
            let data: String
            switch rule.payload {
            case .data:
                data = payloadText
            case .envelope:
                if envelope == nil {
                    envelope = Self.mqttEnvelope(topic: topic, payload: payloadText, qos: qos, retain: retain, receivedAt: receivedAt)
                }
                data = envelope ?? ""
            case .projection(let pointer):
                guard let value = document?.value(at: pointer) else {
                    deadLetter(.templateValueMissing(pointer: pointer.source, usage: "payload = \"json:\(pointer.source)\""))
                    continue
                }
                data = value.projectionText
            }
            let size = data.utf8.count
            if size > maxEventBytes {
                deadLetter(.dataTooLarge(bytes: size, limit: maxEventBytes))
                continue
            }
            routing.events.append(PusherEventPublish(rule: rule.name, channel: channel, event: event, data: data, via: rule.via))
        }
        return routing
    }

    /// The dead-letter reason for a template that could not be rendered.
    static func reason(_ gap: NameTemplate.Gap, in usage: String) -> DeadLetterReason {
        switch gap {
        case .placeholder(let name): .missingPlaceholderValue(name)
        case .jsonValue(let pointer): .templateValueMissing(pointer: pointer.source, usage: usage)
        }
    }

    /// `{"topic","payload","qos","retain","received_at"}` with `payload` embedded as JSON when it is JSON.
    static func mqttEnvelope(topic: String, payload: String, qos: Int, retain: Bool, receivedAt: UTCTimestamp) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(payload.utf8.count + topic.utf8.count + 80)
        out.append(contentsOf: "{\"topic\":".utf8)
        JSONText.appendString(topic, to: &out)
        out.append(contentsOf: ",\"payload\":".utf8)
        if JSONText.isValid(payload) {
            out.append(contentsOf: payload.utf8)
        } else {
            JSONText.appendString(payload, to: &out)
        }
        out.append(contentsOf: Array(",\"qos\":\(qos),\"retain\":\(retain),\"received_at\":\"".utf8))
        out.append(contentsOf: receivedAt.rfc3339.utf8)
        out.append(contentsOf: "\"}".utf8)
        return String(decoding: out, as: UTF8.self)
    }

    // MARK: Pusher → MQTT

    /// The indices of the rules that take events on `channel`: exact-channel rules first, then
    /// prefix rules, each group in file order.
    public func pusherRuleIndices(forChannel channel: String) -> [Int] {
        let exact = rulesByChannel[channel] ?? []
        guard !prefixRules.isEmpty else { return exact }
        return exact + prefixRules.lazy.filter { ChannelDiscoverySettings.name(channel, isUnder: $0.prefix) }.map(\.rule)
    }

    /// Routes one Pusher event: which MQTT messages to publish, what to dead-letter.
    /// Protocol events (`pusher:*`, `pusher_internal:*`) are never routed.
    public func route(channel: String, event: String, data: String, userID: String?, receivedAt: UTCTimestamp) -> PusherEventRouting {
        var routing = PusherEventRouting()
        guard !EventName.isProtocolEvent(event) else { return routing }
        let indices = pusherRuleIndices(forChannel: channel)
        guard !indices.isEmpty else { return routing }
        var envelope: [UInt8]?
        var document: PayloadDocument?
        for index in indices {
            let rule = pusherRules[index]
            guard rule.events.contains(event) else { continue }
            func deadLetter(_ reason: DeadLetterReason) {
                routing.deadLetters.append(
                    DeadLetter(
                        rule: rule.name, reason: reason, source: .pusher(channel: channel, event: event), payload: Array(data.utf8),
                        userID: userID))
            }
            let pointers = pusherRulePointers[index]
            if !pointers.isEmpty {
                if document == nil { document = PayloadDocument(Array(data.utf8)) }
                document!.prefetch(pointers)
            }
            if let condition = rule.conditions.condition, !condition.matches(&document!) {
                routing.filtered.append(rule.name)
                continue
            }
            let values = TemplateValues(
                channel: Substring(channel), event: Substring(event), userID: userID.map { Substring($0) }, bridge: Substring(bridge),
                suffix: rule.channelPrefix.flatMap { ChannelDiscoverySettings.suffix(of: channel, under: $0) })
            var topic = ""
            if let gap = rule.topic.render(into: &topic, values: values, payload: &document, escapingLevels: true) {
                deadLetter(Self.reason(gap, in: "the topic template"))
                continue
            }
            if let problem = TopicName.problem(with: topic) {
                deadLetter(.invalidTopic(topic, problem: problem))
                continue
            }
            let payload: [UInt8]
            switch rule.payload {
            case .data:
                payload = Array(data.utf8)
            case .envelope:
                if envelope == nil {
                    envelope = Self.pusherEnvelope(
                        channel: channel, event: event, data: data, userID: userID, bridge: bridge, receivedAt: receivedAt)
                }
                payload = envelope ?? []
            case .projection(let pointer):
                guard let value = document?.value(at: pointer) else {
                    deadLetter(.templateValueMissing(pointer: pointer.source, usage: "payload = \"json:\(pointer.source)\""))
                    continue
                }
                payload = Array(value.projectionText.utf8)
            }
            var properties: [MQTTUserProperty] = []
            if userProperties {
                properties.reserveCapacity(3)
                properties.append(MQTTUserProperty("pusher-channel", channel))
                properties.append(MQTTUserProperty("pusher-event", event))
                if let userID { properties.append(MQTTUserProperty("pusher-user-id", userID)) }
            }
            routing.publishes.append(
                MQTTPublish(rule: rule.name, topic: topic, payload: payload, qos: rule.qos, retain: rule.retain, userProperties: properties)
            )
        }
        return routing
    }

    /// `{"channel","event","data","user_id"?,"bridge","received_at"}` with `data` embedded as JSON
    /// when it is JSON, else as a string (docs/contract.md §5.1).
    static func pusherEnvelope(channel: String, event: String, data: String, userID: String?, bridge: String, receivedAt: UTCTimestamp)
        -> [UInt8]
    {
        var out: [UInt8] = []
        out.reserveCapacity(data.utf8.count + channel.utf8.count + event.utf8.count + 96)
        out.append(contentsOf: "{\"channel\":".utf8)
        JSONText.appendString(channel, to: &out)
        out.append(contentsOf: ",\"event\":".utf8)
        JSONText.appendString(event, to: &out)
        out.append(contentsOf: ",\"data\":".utf8)
        if JSONText.isValid(data) {
            out.append(contentsOf: data.utf8)
        } else {
            JSONText.appendString(data, to: &out)
        }
        if let userID {
            out.append(contentsOf: ",\"user_id\":".utf8)
            JSONText.appendString(userID, to: &out)
        }
        out.append(contentsOf: ",\"bridge\":".utf8)
        JSONText.appendString(bridge, to: &out)
        out.append(contentsOf: ",\"received_at\":\"".utf8)
        out.append(contentsOf: receivedAt.rfc3339.utf8)
        out.append(contentsOf: "\"}".utf8)
        return out
    }
}
