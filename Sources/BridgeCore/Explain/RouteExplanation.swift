import BridgeVocabulary
import MQTTVocabulary
import PusherProtocol

/// What `pusher-mqtt-bridge route` prints: for one hypothetical message, every bridge's verdict —
/// which rules match and the exact targets and payloads they would send, which matches would be
/// dead-lettered or skipped and why, and for rules that do not match, why not (docs/contract.md §3).
/// It runs the real ``RuleTable`` so the answer is what the daemon would do.
public enum RouteExplanation {
    /// Explains an MQTT message on `topic` with `payload`.
    public static func explain(
        topic: String, payload: [UInt8], qos: Int = 0, retain: Bool = false, in configuration: BridgeConfiguration,
        bridge: String? = nil, receivedAt: UTCTimestamp
    ) -> String {
        var lines = ["mqtt message on topic \"\(topic)\" (\(payload.count) bytes, qos \(qos)\(retain ? ", retained" : ""))"]
        if let problem = TopicName.problem(with: topic) {
            lines.append("note: this topic cannot be published to: \(problem)")
        }
        for settings in configuration.bridges where bridge == nil || settings.name == bridge {
            let table = RuleTable(bridge: settings)
            let routing = table.route(topic: topic, payload: payload, qos: qos, retain: retain, receivedAt: receivedAt)
            lines.append("")
            lines.append("bridge \(settings.name):")
            var explained = Set<String>()
            func payloadLines(_ ruleName: String, target: String?) -> [String] {
                guard let rule = settings.mqttToPusherRules.first(where: { $0.name == ruleName }),
                    rule.readsPayload || rule.conditions.shapesRate
                else { return [] }
                let pointers = rule.channel.jsonPointers + rule.event.jsonPointers + (rule.payload.projectionPointer.map { [$0] } ?? [])
                return PayloadExplanation.lines(conditions: rule.conditions, pointers: pointers, payload: payload, target: target)
            }
            for event in routing.events {
                explained.insert(event.rule)
                if let user = UserID.ofServerToUserChannel(event.channel) {
                    // `to_user`, `terminate_user` (docs/contract.md §8.2).
                    if event.terminatesUser {
                        lines.append(
                            "  rule \(event.rule): MATCH -> terminate the connections of user \"\(user)\" "
                                + "(POST /apps/ID/users/\(user)/terminate_connections; the payload is ignored)")
                        continue
                    }
                    lines.append(
                        "  rule \(event.rule): MATCH -> user \"\(user)\" (every signed-in connection, channel \(event.channel)) "
                            + "event \"\(event.event)\"")
                } else {
                    lines.append(
                        "  rule \(event.rule): MATCH -> pusher channel \"\(event.channel)\" event \"\(event.event)\" via \(event.via.rawValue)"
                    )
                }
                lines.append("    data (\(event.data.utf8.count) bytes): \(event.data)")
                lines += payloadLines(event.rule, target: event.channel + " " + event.event)
            }
            for rule in routing.filtered {
                explained.insert(rule)
                lines.append("  rule \(rule): MATCH, FILTERED: the payload does not satisfy where")
                lines += payloadLines(rule, target: nil)
            }
            for deadLetter in routing.deadLetters {
                explained.insert(deadLetter.rule)
                lines += describe(deadLetter, deadLetterTopic: settings.mqtt.deadLetterTopic)
                lines += payloadLines(deadLetter.rule, target: nil)
            }
            for skipped in routing.skipped {
                explained.insert(skipped.rule)
                lines.append("  rule \(skipped.rule): MATCH, SKIPPED: \(skipped.reason)")
            }
            for rule in settings.mqttToPusherRules where !explained.contains(rule.name) {
                switch rule.filter.explain(topic) {
                case .mismatch(let why): lines.append("  rule \(rule.name): no match (filter \"\(rule.filter.text)\"): \(why)")
                case .match: lines.append("  rule \(rule.name): matches the filter but produced nothing")
                }
            }
            if settings.mqttToPusherRules.isEmpty {
                lines.append("  no rules with from = \"mqtt\"")
            } else if routing.isUnmatched {
                lines.append("  => nothing is sent: no rule matches")
            }
            for mirror in settings.presence where TopicFilter.matchesPresenceMembers(mirror, topic: topic) {
                lines.append(
                    "  presence mirror \(mirror.channel): a retained message here is checked against the member list (ghosts are cleared)")
            }
        }
        return lines.joined(separator: "\n")
    }

    /// Explains a Pusher event.
    public static func explain(
        channel: String, event: String, data: String, userID: String? = nil, in configuration: BridgeConfiguration, bridge: String? = nil,
        receivedAt: UTCTimestamp
    ) -> String {
        var lines = [
            "pusher event \"\(event)\" on channel \"\(channel)\" (\(data.utf8.count) bytes of data\(userID.map { ", user_id \($0)" } ?? ""))"
        ]
        if let problem = ChannelName.problem(with: channel) {
            lines.append("note: this is not a valid channel name: \(problem)")
        }
        for settings in configuration.bridges where bridge == nil || settings.name == bridge {
            let table = RuleTable(bridge: settings)
            let routing = table.route(channel: channel, event: event, data: data, userID: userID, receivedAt: receivedAt)
            lines.append("")
            lines.append("bridge \(settings.name):")
            lines += discoveryLines(channel: channel, settings: settings)
            var explained = Set<String>()
            func payloadLines(_ ruleName: String, target: String?) -> [String] {
                guard let rule = settings.pusherToMQTTRules.first(where: { $0.name == ruleName }),
                    rule.readsPayload || rule.conditions.shapesRate
                else { return [] }
                let pointers = rule.topic.jsonPointers + (rule.payload.projectionPointer.map { [$0] } ?? [])
                return PayloadExplanation.lines(conditions: rule.conditions, pointers: pointers, payload: Array(data.utf8), target: target)
            }
            for rule in routing.filtered {
                explained.insert(rule)
                lines.append("  rule \(rule): MATCH, FILTERED: the event data does not satisfy where")
                lines += payloadLines(rule, target: nil)
            }
            for publish in routing.publishes {
                explained.insert(publish.rule)
                lines.append(
                    "  rule \(publish.rule): MATCH -> mqtt topic \"\(publish.topic)\" qos \(publish.qos)\(publish.retain ? " retained" : "")"
                )
                lines.append("    payload (\(publish.payload.count) bytes): \(String(decoding: publish.payload, as: UTF8.self))")
                if !publish.userProperties.isEmpty {
                    lines.append(
                        "    user properties: " + publish.userProperties.map { "\($0.name)=\($0.value)" }.joined(separator: ", "))
                }
                lines += payloadLines(publish.rule, target: publish.topic)
            }
            for deadLetter in routing.deadLetters {
                explained.insert(deadLetter.rule)
                lines += describe(deadLetter, deadLetterTopic: settings.mqtt.deadLetterTopic)
                lines += payloadLines(deadLetter.rule, target: nil)
            }
            for rule in settings.pusherToMQTTRules where !explained.contains(rule.name) {
                if !rule.takes(channel: channel) {
                    let listens = rule.discovery == nil ? "listens on channel" : "takes channels under channel_prefix"
                    lines.append("  rule \(rule.name): no match: \(listens) \"\(rule.channel)\"")
                } else if EventName.isProtocolEvent(event) {
                    lines.append("  rule \(rule.name): no match: \"\(event)\" is a protocol event; rules never forward pusher:* events")
                } else if case .named(let names) = rule.events, !names.contains(event) {
                    lines.append("  rule \(rule.name): no match: takes only events \(names.map { "\"\($0)\"" }.joined(separator: ", "))")
                } else {
                    lines.append("  rule \(rule.name): matches but produced nothing")
                }
            }
            if settings.pusherToMQTTRules.isEmpty {
                lines.append("  no rules with from = \"pusher\"")
            } else if routing.isUnmatched {
                lines.append("  => nothing is sent: no rule matches")
            }
            for mirror in settings.presence where mirror.discovery == nil && mirror.channel == channel {
                lines.append(
                    "  presence mirror: member events of this channel become retained \(mirror.topic)/members/<user_id> and \(mirror.topic)/count"
                )
            }
        }
        return lines.joined(separator: "\n")
    }

    /// Which `channel_prefix` rules and mirrors would take `channel` when discovery finds it
    /// occupied (docs/contract.md §7.1), with its `{suffix}`.
    static func discoveryLines(channel: String, settings: BridgeSettings) -> [String] {
        var lines: [String] = []
        for rule in settings.pusherToMQTTRules {
            guard let prefix = rule.channelPrefix, let suffix = ChannelDiscoverySettings.suffix(of: channel, under: prefix) else {
                continue
            }
            lines.append(
                "  discovery: rule \(rule.name) takes this channel when it is occupied "
                    + "(channel_prefix \"\(prefix)\", {suffix} = \"\(suffix)\")"
            )
        }
        for mirror in settings.presence {
            guard let room = mirror.room(channel) else { continue }
            lines.append(
                "  discovery: presence mirror \(mirror.discoveryName) takes this room when it is occupied: members become retained "
                    + "\(room.topic)/members/<user_id> and \(room.topic)/count")
        }
        return lines
    }

    /// What happens to a message a rule matched but cannot deliver (docs/contract.md §5.2).
    private static func describe(_ deadLetter: DeadLetter, deadLetterTopic: String?) -> [String] {
        var lines = ["  rule \(deadLetter.rule): MATCH, DEAD LETTER: \(deadLetter.reason)"]
        if let deadLetterTopic {
            lines.append("    would be published to \(deadLetterTopic): \(String(decoding: deadLetter.jsonPayload, as: UTF8.self))")
        } else {
            lines.append("    counted and logged (no dead_letter_topic set)")
        }
        return lines
    }
}

extension TopicFilter {
    static func matchesPresenceMembers(_ mirror: PresenceMirrorRule, topic: String) -> Bool {
        guard case .success(let filter) = TopicFilter.parse(mirror.retainedMembersFilter) else { return false }
        return filter.match(topic) != nil
    }
}
