import BridgeVocabulary

/// An event held by a rule's `throttle`, with the time it came in (for delivery latency).
public struct ShapedPusherEvent: Sendable {
    public var event: PusherEventPublish
    public var receivedAtMillis: Int64
}

/// An MQTT publish held by a rule's `throttle`, with the time its Pusher event came in.
public struct ShapedMQTTPublish: Sendable {
    public var publish: MQTTPublish
    public var receivedAtMillis: Int64
}

/// The ``RateShaper``s of a bridge's rules with `throttle` or `on_change` (docs/contract.md
/// §7.3), one per rule, by rule name; targets are the rendered `channel` + `event` (MQTT →
/// Pusher) or topic (Pusher → MQTT).
struct RuleShaping<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    var toPusher: [String: RateShaper<Instant, ShapedPusherEvent>] = [:]
    var toMQTT: [String: RateShaper<Instant, ShapedMQTTPublish>] = [:]
    /// The conditions each shaper was built from (a reload keeps a shaper whose rule kept them).
    private(set) var conditions: [String: PayloadConditions] = [:]

    /// Shapers for every rule of `settings` that shapes its rate.
    init(settings: BridgeSettings) {
        for rule in settings.mqttToPusherRules where rule.conditions.shapesRate {
            toPusher[rule.name] = Self.shaper(rule.conditions)
            conditions[rule.name] = rule.conditions
        }
        for rule in settings.pusherToMQTTRules where rule.conditions.shapesRate {
            toMQTT[rule.name] = Self.shaper(rule.conditions)
            conditions[rule.name] = rule.conditions
        }
    }

    private static func shaper<Message: Sendable>(_ conditions: PayloadConditions) -> RateShaper<Instant, Message> {
        RateShaper(.init(throttle: conditions.throttle, onChange: conditions.onChange, maxTargets: conditions.maxTargets))
    }

    /// For a reload: keeps the shapers (and what they hold) of rules whose conditions did not
    /// change; returns the others, whose held messages the caller releases at once.
    mutating func replace(with new: RuleShaping) -> RuleShaping {
        var retired = RuleShaping()
        var next = new
        for (rule, shaper) in toPusher {
            if new.conditions[rule] == conditions[rule], next.toPusher[rule] != nil {
                next.toPusher[rule] = shaper
            } else {
                retired.toPusher[rule] = shaper
            }
        }
        for (rule, shaper) in toMQTT {
            if new.conditions[rule] == conditions[rule], next.toMQTT[rule] != nil {
                next.toMQTT[rule] = shaper
            } else {
                retired.toMQTT[rule] = shaper
            }
        }
        self = next
        return retired
    }

    private init() {}

    var isEmpty: Bool { toPusher.isEmpty && toMQTT.isEmpty }

    /// The shortest `throttle` of any rule: a new held message is never due sooner than this.
    var shortestThrottle: Duration? {
        conditions.values.compactMap(\.throttle).min()
    }

    /// When the next held message is due.
    var nextDeadline: Instant? {
        (toPusher.values.compactMap(\.nextDeadline) + toMQTT.values.compactMap(\.nextDeadline)).min()
    }

    /// Targets remembered, per rule (the `throttle_targets` gauge).
    var targetCounts: [String: Int] {
        var counts: [String: Int] = [:]
        for (rule, shaper) in toPusher { counts[rule] = shaper.targetCount }
        for (rule, shaper) in toMQTT { counts[rule] = shaper.targetCount }
        return counts
    }
}
