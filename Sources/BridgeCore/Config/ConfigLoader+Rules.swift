import BridgeVocabulary
import MQTTVocabulary
import PusherProtocol
import TOMLKit

extension LoadContext {
    func readRule(_ reader: TableReader, bridge: String) -> BridgeRule? {
        let name = reader.nonEmptyString("name", required: true)
        if let name, !Self.isRuleName(name) {
            report(reader.path.key("name"), "\"\(name)\" is not a valid rule name; use letters, digits, '_' and '-'")
        }
        guard let from = reader.string("from", required: true) else {
            reader.rejectUnknownKeys(allowed: Array(Set(Self.pusherRuleKeys + Self.mqttRuleKeys)))
            return nil
        }
        switch from {
        case "pusher":
            let onlyMQTT = Set(Self.mqttRuleKeys).subtracting(Self.pusherRuleKeys)
            reader.rejectUnknownKeys(
                allowed: Self.pusherRuleKeys,
                elsewhere: Dictionary(uniqueKeysWithValues: onlyMQTT.map { ($0, "'\($0)' only applies to rules with from = \"mqtt\"") }))
            let rule = readPusherRule(reader)
            guard let rule, let name, Self.isRuleName(name) else { return nil }
            return .pusherToMQTT(
                PusherToMQTTRule(
                    name: name, channel: rule.channel, events: rule.events, topic: rule.topic, qos: rule.qos, retain: rule.retain,
                    payload: rule.payload, conditions: rule.conditions, discovery: rule.discovery))
        case "mqtt":
            let onlyPusher = Set(Self.pusherRuleKeys).subtracting(Self.mqttRuleKeys)
            reader.rejectUnknownKeys(
                allowed: Self.mqttRuleKeys,
                elsewhere: Dictionary(uniqueKeysWithValues: onlyPusher.map { ($0, "'\($0)' only applies to rules with from = \"pusher\"") })
            )
            let rule = readMQTTRule(reader)
            guard var rule, let name, Self.isRuleName(name) else { return nil }
            rule.name = name
            return .mqttToPusher(rule)
        default:
            var message = "\"\(from)\" is not one of \"pusher\", \"mqtt\""
            if let suggestion = Spelling.suggestion(for: from, among: ["pusher", "mqtt"]) {
                message += " (did you mean \"\(suggestion)\"?)"
            }
            report(reader.path.key("from"), message)
            reader.rejectUnknownKeys(allowed: Array(Set(Self.pusherRuleKeys + Self.mqttRuleKeys)))
            return nil
        }
    }

    private func readPusherRule(_ reader: TableReader) -> PusherToMQTTRule? {
        var valid = true
        let selection = readChannelSelection(reader, presence: false)
        if let selection, selection.discovery == nil {
            let channel = selection.name
            if channel.contains("{") {
                report(
                    reader.path.key("channel"),
                    "rules with from = \"pusher\" name one exact channel (or a channel_prefix); Pusher has no wildcard subscriptions")
                valid = false
            } else if let problem = ChannelName.problem(with: channel) {
                report(reader.path.key("channel"), problem)
                valid = false
            }
        }
        var events = EventSelection.all
        if let names = reader.stringArray("events") {
            if names.isEmpty {
                report(reader.path.key("events"), "must name at least one event, or \"*\" for all")
                valid = false
            } else if names.contains("*") {
                if names.count > 1 { report(reader.path.key("events"), "\"*\" already selects every event; list it alone") }
            } else {
                for name in names {
                    if let problem = EventName.problem(with: name) {
                        report(reader.path.key("events"), "\"\(name)\": \(problem)")
                        valid = false
                    }
                }
                events = .named(names)
            }
        }
        var topic: NameTemplate?
        if let source = reader.nonEmptyString("topic", required: true) {
            let context: NameTemplate.Context = reader.has("channel_prefix") ? .discoveredPusherEvent : .pusherEvent
            switch NameTemplate.parse(source, context: context) {
            case .success(let template):
                if let problem = Self.topicTemplateProblem(template) {
                    report(reader.path.key("topic"), problem)
                } else {
                    topic = template
                }
            case .failure(let problem):
                report(reader.path.key("topic"), problem.description)
            }
        }
        let qos = reader.qos("qos") ?? 1
        let retain = reader.bool("retain") ?? false
        let payload = readPayloadMode(reader)
        let conditions = readConditions(reader)
        guard valid, let selection, let topic, let payload, let conditions else { return nil }
        return PusherToMQTTRule(
            name: "", channel: selection.name, events: events, topic: topic, qos: qos, retain: retain, payload: payload,
            conditions: conditions, discovery: selection.discovery)
    }

    /// What can be known about a topic template before any message: its literal parts may not hold
    /// wildcards or NUL, and it may not publish into `$`-topics (broker-reserved, MQTT §4.7.2).
    static func topicTemplateProblem(_ template: NameTemplate) -> String? {
        let literal = template.literalText
        if MQTTTopicText.containsWildcard(literal) {
            return "a topic to publish to cannot contain '+' or '#' (placeholder values are escaped, literal text is not)"
        }
        if literal.utf8.contains(0) { return "topic contains a NUL character" }
        if MQTTTopicText.isReserved(template.literalPrefix) { return "topics starting with '$' are reserved for the broker" }
        if literal.utf8.count > TopicFilter.maximumLength { return "topic is longer than \(TopicFilter.maximumLength) bytes" }
        return MQTTClientLimits.stringProblem(literal).map { "topic \($0)" }
    }

    private func readMQTTRule(_ reader: TableReader) -> MQTTToPusherRule? {
        var filter: TopicFilter?
        if let source = reader.nonEmptyString("topic", required: true) {
            switch TopicFilter.parse(source) {
            case .success(let parsed):
                // What the MQTT client refuses to subscribe to (MQTTClientLimits), beyond MQTT's own rules.
                if let problem = MQTTClientLimits.stringProblem(source) {
                    report(reader.path.key("topic"), "topic filter \(problem)")
                } else {
                    filter = parsed
                }
            case .failure(let problem): report(reader.path.key("topic"), problem.description)
            }
        }
        let via = reader.choice("via", PusherDelivery.self) ?? .http
        let target = readTarget(reader, via: via)
        var channel: NameTemplate?
        var event: NameTemplate?
        if let filter, let target {
            let context = NameTemplate.Context.mqttMessage(captures: filter.singleLevelWildcards, multiLevel: filter.hasMultiLevelWildcard)
            if let source = reader.nonEmptyString(target.rawValue, required: true) {
                switch NameTemplate.parse(source, context: context) {
                case .success(let template):
                    let problem =
                        target == .channel
                        ? Self.channelTemplateProblem(template, filter: filter, via: via)
                        : Self.userTemplateProblem(template, filter: filter)
                    if let problem {
                        report(reader.path.key(target.rawValue), problem)
                    } else {
                        channel = template
                    }
                case .failure(let problem): report(reader.path.key(target.rawValue), problem.description)
                }
            }
            if target == .terminateUser {
                if case .success(let constant) = NameTemplate.parse(PusherEventPublish.terminateUserEvent, context: context) {
                    event = constant
                }
            } else if let source = reader.nonEmptyString("event", required: true) {
                switch NameTemplate.parse(source, context: context) {
                case .success(let template):
                    if let problem = Self.eventTemplateProblem(template, via: via) {
                        report(reader.path.key("event"), problem)
                    } else {
                        event = template
                    }
                case .failure(let problem): report(reader.path.key("event"), problem.description)
                }
            }
        } else {
            _ = reader.string(target?.rawValue ?? "channel", required: target != nil)
            if target != .terminateUser { _ = reader.string("event", required: true) }
        }
        let qos = reader.qos("qos") ?? 1
        let forwardRetained = reader.bool("forward_retained") ?? false
        let payload = readPayloadMode(reader)
        let conditions = readConditions(reader)
        guard let filter, let target, let channel, let event, let payload, let conditions else { return nil }
        var rule = MQTTToPusherRule(
            name: "", filter: filter, channel: channel, event: event, qos: qos, forwardRetained: forwardRetained, payload: payload,
            via: via,
            conditions: conditions)
        rule.target = target
        return rule
    }

    /// Channel-name rules (docs/pusher-protocol.md §1 "Names and sizes") that hold whatever the message.
    static func channelTemplateProblem(_ template: NameTemplate, filter: TopicFilter, via: PusherDelivery) -> String? {
        if let problem = alphabetTemplateProblem(
            template, filter: filter, naming: "channel name", maxLength: PusherLimits.channelNameLength)
        {
            return problem
        }
        if via == .clientEvent {
            guard template.isConstant else {
                return "via = \"client-event\" needs one fixed channel (the bridge must be subscribed to it to send client events)"
            }
            let kind = ChannelName(template.literalText).kind
            guard kind.allowsClientEvents else {
                return "client events are only allowed on private- and presence- channels (not encrypted ones)"
            }
        }
        return nil
    }

    /// Which of `channel`, `to_user`, `terminate_user` the rule names (exactly one), or `nil`
    /// after reporting why not.
    private func readTarget(_ reader: TableReader, via: PusherDelivery) -> PusherTarget? {
        let named = [PusherTarget.channel, .user, .terminateUser].filter { reader.has($0.rawValue) }
        guard let target = named.first else {
            report(reader.path.key("channel"), "required key is missing (or to_user, or terminate_user)")
            return nil
        }
        if named.count > 1 {
            report(
                reader.path.key(named[1].rawValue),
                "a rule sends to one of channel, to_user or terminate_user; this one also has \(target.rawValue)")
            return nil
        }
        if target != .channel, via == .clientEvent {
            report(reader.path.key("via"), "\(target.rawValue) goes through the HTTP API; via = \"client-event\" only applies to channels")
            return nil
        }
        if target == .terminateUser {
            for key in ["event", "payload"] where reader.has(key) {
                report(reader.path.key(key), "terminate_user sends no event: the message's payload is ignored; remove \(key)")
            }
        }
        return target
    }

    /// User-id rules (1–200 characters of the channel-name alphabet) that hold whatever the message.
    static func userTemplateProblem(_ template: NameTemplate, filter: TopicFilter) -> String? {
        alphabetTemplateProblem(template, filter: filter, naming: "user id", maxLength: UserID.maxLength)
    }

    /// What makes a template of a name in the channel-name alphabet (a channel name, a user id)
    /// wrong whatever the message: a literal character outside it, `{topic}` over several levels,
    /// literal text over `maxLength`, nothing at all.
    static func alphabetTemplateProblem(_ template: NameTemplate, filter: TopicFilter, naming: String, maxLength: Int) -> String? {
        for byte in template.literalText.utf8 where !ChannelName.isChannelNameByte(byte) {
            let shown = byte < 0x80 ? String(UnicodeScalar(byte)) : "non-ASCII"
            return "'\(shown)' can never appear in a \(naming); allowed are A-Z a-z 0-9 _ - = @ , . ;"
        }
        if template.uses(.topic), filter.levels.count > 1 {
            return "{topic} always contains '/' for the filter \"\(filter.text)\", which is not allowed in \(naming)s"
        }
        if template.literalText.utf8.count > maxLength {
            return "is longer than \(maxLength) characters before any placeholder is filled"
        }
        if template.segments.isEmpty { return "must not be empty" }
        return nil
    }

    /// Event-name rules that hold whatever the message.
    static func eventTemplateProblem(_ template: NameTemplate, via: PusherDelivery) -> String? {
        let prefix = template.literalPrefix
        if prefix.hasUTF8Prefix("pusher:") || prefix.hasUTF8Prefix("pusher_internal:")
            || (template.isConstant && EventName.isProtocolEvent(prefix))
        {
            return "event names starting with 'pusher:' are reserved for the protocol"
        }
        if template.literalText.utf8.count > PusherLimits.eventNameLength {
            return "is longer than \(PusherLimits.eventNameLength) characters before any placeholder is filled"
        }
        if via == .clientEvent, !prefix.hasUTF8Prefix("client-") {
            return "via = \"client-event\" needs an event name starting with \"client-\""
        }
        return nil
    }
}
