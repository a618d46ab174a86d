import BridgeVocabulary
import PusherProtocol

/// What a kept dead letter is, for a redrive (docs/contract.md §8.3): the message as it came in, or
/// — for an event the Pusher HTTP API refused — the event as it went out.
public enum RedrivenMessage: Sendable, Equatable {
    case mqtt(topic: String, payload: [UInt8], qos: Int, retain: Bool)
    case pusher(channel: String, event: String, data: String, userID: String?)
    /// An event the Pusher API refused (`rejected`): sent again as it was, if its rule still exists.
    case toPusher(rule: String, channel: String, event: String, data: String)
}

/// What a redrive did with one letter.
public enum RedriveRouting: Sendable, Equatable {
    /// The current rules took it: the actions hold its new messages (and any new dead letters).
    case routed
    /// No rule takes it now: nothing happened, the letter stays kept.
    case unmatched
}

extension BridgeStateMachine {
    /// Routes a kept dead letter again with the current rules (docs/contract.md §8.3). Unlike a
    /// message from a client it passes no echo or duplicate filter (it was seen already, and the
    /// operator asked for it again) and no `throttle` (an operator's one-off, not a flow); what it
    /// becomes is counted like any message: `received`, then `delivered` or `dead_lettered` later.
    public mutating func redriven(
        _ message: RedrivenMessage, receivedAt: UTCTimestamp, now: Instant, into actions: inout [Action]
    ) -> RedriveRouting {
        let millis = receivedAt.millisecondsSince1970
        switch message {
        case .mqtt(let topic, let payload, let qos, let retain):
            let routing = rules.route(topic: topic, payload: payload, qos: qos, retain: retain, receivedAt: receivedAt)
            guard !routing.events.isEmpty || !routing.deadLetters.isEmpty else { return .unmatched }
            actions.append(.received(.mqttToPusher, by: routing.events.count + routing.deadLetters.count))
            for event in routing.events { actions.append(.enqueueToPusher(event, receivedAtMillis: millis)) }
            for letter in routing.deadLetters {
                deadLettered(letter, direction: .mqttToPusher, receivedAtMillis: millis, now: now, into: &actions)
            }
        case .pusher(let channel, let event, let data, let userID):
            let routing = rules.route(channel: channel, event: event, data: data, userID: userID, receivedAt: receivedAt)
            guard !routing.publishes.isEmpty || !routing.deadLetters.isEmpty else { return .unmatched }
            actions.append(.received(.pusherToMQTT, by: routing.publishes.count + routing.deadLetters.count))
            for publish in routing.publishes { actions.append(.enqueueToMQTT(publish, receivedAtMillis: millis)) }
            for letter in routing.deadLetters {
                deadLettered(letter, direction: .pusherToMQTT, receivedAtMillis: millis, now: now, into: &actions)
            }
        case .toPusher(let rule, let channel, let event, let data):
            guard let current = rules.mqttRules.first(where: { $0.name == rule }) else { return .unmatched }
            actions.append(.received(.mqttToPusher, by: 1))
            let publish = PusherEventPublish(rule: rule, channel: channel, event: event, data: data, via: current.via)
            actions.append(.enqueueToPusher(publish, receivedAtMillis: millis))
        }
        return .routed
    }
}
