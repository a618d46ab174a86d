import BridgeVocabulary
import PusherProtocol

extension BridgeStateMachine {
    // MARK: Pusher → MQTT

    // The two message entry points are pre-specialized for the daemon's clock (exported, so its
    // calls from another module take them): unspecialized, every message paid for generic
    // metadata lookups.

    /// Pusher delivered an application event on `channel`.
    @_specialize(exported:true,where Instant == ContinuousClock.Instant)
    public mutating func pusherEventReceived(
        channel: String, event: String, data: String, userID: String?,
        receivedAt: UTCTimestamp, now: Instant, into actions: inout [Action]
    ) {
        // Protocol events (`pusher:`, `pusher_internal:`) are the client's business, not data.
        guard !isStopping, !EventName.isProtocolEvent(event) else { return }
        let routing = rules.route(channel: channel, event: event, data: data, userID: userID, receivedAt: receivedAt)
        if routing.isUnmatched {
            actions.append(.received(.pusherToMQTT, by: 1))
            actions.append(.count(rule: "", direction: .pusherToMQTT, outcome: .unmatched, by: 1))
            return
        }
        actions.append(.received(.pusherToMQTT, by: routing.publishes.count + routing.deadLetters.count + routing.filtered.count))
        let millis = receivedAt.millisecondsSince1970
        for rule in routing.filtered { actions.append(.count(rule: rule, direction: .pusherToMQTT, outcome: .filtered, by: 1)) }
        for publish in routing.publishes {
            if shaping.toMQTT.isEmpty {
                actions.append(.enqueueToMQTT(publish, receivedAtMillis: millis))
            } else {
                shape(publish, receivedAtMillis: millis, now: now, into: &actions)
            }
        }
        for letter in routing.deadLetters {
            deadLettered(letter, direction: .pusherToMQTT, receivedAtMillis: millis, now: now, into: &actions)
        }
    }

    /// A presence channel's member list arrived (on every subscribe and resubscribe).
    public mutating func presenceSubscribed(
        channel: String, members: [PresenceMember], receivedAtMillis: Int64, into actions: inout [Action]
    ) {
        withMirror(channel, receivedAtMillis: receivedAtMillis, into: &actions) { $0.subscriptionSucceeded(members: members) }
    }

    /// A member joined a presence channel.
    public mutating func presenceMemberAdded(channel: String, member: PresenceMember, receivedAtMillis: Int64, into actions: inout [Action])
    {
        withMirror(channel, receivedAtMillis: receivedAtMillis, into: &actions) { $0.memberAdded(member) }
    }

    /// A member left a presence channel.
    public mutating func presenceMemberRemoved(channel: String, userID: String, receivedAtMillis: Int64, into actions: inout [Action]) {
        withMirror(channel, receivedAtMillis: receivedAtMillis, into: &actions) { $0.memberRemoved(userID: userID) }
    }

    // MARK: MQTT → Pusher

    /// The bridge is about to hand this publish to the broker (the loop guard's record).
    public mutating func publishing(topic: String, payload: [UInt8], now: Instant) {
        guard inbound.guardsAgainstEchoes else { return }
        inbound.publishing(MessageDigest(topic: topic, payload: payload), now: now)
    }

    /// A subscription delivered a message: an echo or a redelivery is suppressed, a presence
    /// mirror's own retained member is read back, anything else is routed.
    @_specialize(exported:true,where Instant == ContinuousClock.Instant)
    public mutating func mqttMessageReceived(
        topic: String, payload: [UInt8], qos: Int, retain: Bool,
        receivedAt: UTCTimestamp, now: Instant, into actions: inout [Action]
    ) {
        switch inbound.received(MessageDigest(topic: topic, payload: payload), qos: qos, now: now) {
        case .echo, .redelivery:
            actions.append(.received(.mqttToPusher, by: 1))
            actions.append(.count(rule: "", direction: .mqttToPusher, outcome: .suppressed, by: 1))
            return
        case .new:
            break
        }
        let millis = receivedAt.millisecondsSince1970
        if presenceMemberTopicFound(topic: topic, payload: payload, receivedAtMillis: millis, into: &actions) { return }
        let routing = rules.route(topic: topic, payload: payload, qos: qos, retain: retain, receivedAt: receivedAt)
        if routing.isUnmatched {
            actions.append(.received(.mqttToPusher, by: 1))
            actions.append(.count(rule: "", direction: .mqttToPusher, outcome: .unmatched, by: 1))
        } else {
            let units = routing.events.count + routing.deadLetters.count + routing.skipped.count + routing.filtered.count
            actions.append(.received(.mqttToPusher, by: units))
        }
        for skipped in routing.skipped {
            actions.append(.count(rule: skipped.rule, direction: .mqttToPusher, outcome: .suppressed, by: 1))
        }
        for rule in routing.filtered { actions.append(.count(rule: rule, direction: .mqttToPusher, outcome: .filtered, by: 1)) }
        for event in routing.events {
            if shaping.toPusher.isEmpty {
                actions.append(.enqueueToPusher(event, receivedAtMillis: millis))
            } else {
                shape(event, receivedAtMillis: millis, now: now, into: &actions)
            }
        }
        for letter in routing.deadLetters {
            deadLettered(letter, direction: .mqttToPusher, receivedAtMillis: millis, now: now, into: &actions)
        }
    }

    // MARK: Outcomes reported by the runtime

    /// A message could not be delivered: count it, log it (at most 20 lines a minute), and
    /// publish it to the dead-letter topic when one is set.
    public mutating func deadLettered(
        _ letter: DeadLetter, direction: MessageDirection, receivedAtMillis: Int64, now: Instant, into actions: inout [Action]
    ) {
        actions.append(.count(rule: letter.rule, direction: direction, outcome: .deadLettered, by: 1))
        actions.append(.keepDeadLetter(letter, direction: direction))
        let (log, suppressed) = deadLetterLog.allow(now: now)
        if log { actions.append(.logDeadLetter(letter, suppressedLogs: suppressed)) }
        if let topic = settings.mqtt.deadLetterTopic {
            // A new message for the broker: it comes in on the Pusher → MQTT side.
            actions.append(.received(.pusherToMQTT, by: 1))
            let publish = MQTTPublish(rule: letter.rule, topic: topic, payload: letter.jsonPayload, qos: 1, retain: false)
            actions.append(.enqueueToMQTT(publish, receivedAtMillis: receivedAtMillis))
        }
    }

    /// An outbox's overflow policy dropped `count` messages while taking one of `rule`'s.
    public mutating func dropped(_ count: Int, rule: String, direction: MessageDirection, now: Instant, into actions: inout [Action]) {
        guard count > 0 else { return }
        actions.append(.count(rule: rule, direction: direction, outcome: .dropped, by: count))
        let (log, suppressed) = dropLog.allow(now: now)
        if log { actions.append(.logDropped(rule: rule, direction: direction, dropped: count, suppressedLogs: suppressed)) }
    }

    // MARK: Presence mirrors

    /// Runs `body` on the mirror of `channel` (if any) and turns its commands into outbox appends.
    mutating func withMirror(
        _ channel: String, receivedAtMillis: Int64, into actions: inout [Action],
        _ body: (inout PresenceMirror) -> [PresenceMirror.Action]
    ) {
        guard var mirror = mirrors[channel] else { return }
        let commands = body(&mirror)
        mirrors[channel] = mirror
        perform(commands, receivedAtMillis: receivedAtMillis, into: &actions)
    }

    /// A presence mirror's commands as Pusher → MQTT publishes, in order.
    func perform(_ commands: [PresenceMirror.Action], receivedAtMillis: Int64, into actions: inout [Action]) {
        if !commands.isEmpty { actions.append(.received(.pusherToMQTT, by: commands.count)) }
        for command in commands {
            switch command {
            case .publishRetained(let topic, let payload, let qos):
                let publish = MQTTPublish(rule: Self.presenceRule, topic: topic, payload: payload, qos: qos, retain: true)
                actions.append(.enqueueToMQTT(publish, receivedAtMillis: receivedAtMillis))
            case .clearRetained(let topic, let qos):
                let publish = MQTTPublish(rule: Self.presenceRule, topic: topic, payload: [], qos: qos, retain: true)
                actions.append(.enqueueToMQTT(publish, receivedAtMillis: receivedAtMillis))
            }
        }
    }

    /// Every mirror's commands for one connection event, channel by channel.
    mutating func forEachMirror(
        receivedAtMillis: Int64, into actions: inout [Action], _ body: (inout PresenceMirror) -> [PresenceMirror.Action]
    ) {
        for channel in mirrors.keys.sorted() {
            withMirror(channel, receivedAtMillis: receivedAtMillis, into: &actions, body)
        }
    }
}
