import BridgeVocabulary

/// `where` verdicts and rate shaping (`throttle`, `on_change`) of the rules (docs/contract.md §7.3).
extension BridgeStateMachine {
    /// When the next message held by a `throttle` is due; the runtime calls
    /// ``shapingTimerFired(now:into:)`` then.
    public var nextShapingDeadline: Instant? { shaping.nextDeadline }

    /// The shortest `throttle` of any rule: a message held from now on is never due sooner, so
    /// the runtime's release timer never needs to sleep longer than this while something is held.
    public var shortestThrottle: Duration? { shaping.shortestThrottle }

    /// Messages a `throttle` holds for `direction` (they count as buffered).
    public func heldMessages(_ direction: MessageDirection) -> Int {
        switch direction {
        case .pusherToMQTT: shaping.toMQTT.values.reduce(0) { $0 + $1.heldCount }
        case .mqttToPusher: shaping.toPusher.values.reduce(0) { $0 + $1.heldCount }
        }
    }

    /// Targets each shaping rule remembers (the `throttle_targets` gauge), by rule.
    public var shapingTargetCounts: [String: Int] { shaping.targetCounts }

    /// The release timer fired: messages whose `throttle` interval ended go to their outboxes.
    public mutating func shapingTimerFired(now: Instant, into actions: inout [Action]) {
        release(&shaping, now: now, into: &actions)
    }

    /// Releases every held message at once (the bridge stops: nothing shaped is lost).
    public mutating func releaseAllShaped(now: Instant, into actions: inout [Action]) {
        release(&shaping, now: now.advanced(by: .seconds(86_400 * 365)), into: &actions)
    }

    func release(_ table: inout RuleShaping<Instant>, now: Instant, into actions: inout [Action]) {
        for rule in table.toPusher.keys.sorted() {
            Self.releaseDue(&table.toPusher[rule]!, rule: rule, direction: .mqttToPusher, now: now, into: &actions, as: Self.toPusher)
        }
        for rule in table.toMQTT.keys.sorted() {
            Self.releaseDue(&table.toMQTT[rule]!, rule: rule, direction: .pusherToMQTT, now: now, into: &actions, as: Self.toMQTT)
        }
    }

    /// An MQTT → Pusher event of a rule with `throttle`/`on_change`: forwarded, held or dropped.
    mutating func shape(_ event: PusherEventPublish, receivedAtMillis: Int64, now: Instant, into actions: inout [Action]) {
        let held = ShapedPusherEvent(event: event, receivedAtMillis: receivedAtMillis)
        guard shaping.toPusher[event.rule] != nil else { return actions.append(Self.toPusher(held)) }
        // A space is in neither a channel nor an event name: the target is unambiguous.
        Self.shape(
            held, target: event.channel + " " + event.event, payload: Array(event.data.utf8), shaper: &shaping.toPusher[event.rule]!,
            rule: event.rule, direction: .mqttToPusher, now: now, into: &actions, as: Self.toPusher)
    }

    /// A Pusher → MQTT publish of a rule with `throttle`/`on_change`: forwarded, held or dropped.
    mutating func shape(_ publish: MQTTPublish, receivedAtMillis: Int64, now: Instant, into actions: inout [Action]) {
        let held = ShapedMQTTPublish(publish: publish, receivedAtMillis: receivedAtMillis)
        guard shaping.toMQTT[publish.rule] != nil else { return actions.append(Self.toMQTT(held)) }
        Self.shape(
            held, target: publish.topic, payload: publish.payload, shaper: &shaping.toMQTT[publish.rule]!, rule: publish.rule,
            direction: .pusherToMQTT, now: now, into: &actions, as: Self.toMQTT)
    }

    private static func toPusher(_ message: ShapedPusherEvent) -> Action {
        .enqueueToPusher(message.event, receivedAtMillis: message.receivedAtMillis)
    }

    private static func toMQTT(_ message: ShapedMQTTPublish) -> Action {
        .enqueueToMQTT(message.publish, receivedAtMillis: message.receivedAtMillis)
    }

    /// Offers one message to its rule's shaper (first closing an interval that ended before the
    /// timer ran) and turns the answer into outbox appends and counts.
    private static func shape<Message: Sendable>(
        _ message: Message, target: String, payload: [UInt8], shaper: inout RateShaper<Instant, Message>, rule: String,
        direction: MessageDirection, now: Instant, into actions: inout [Action], as enqueue: (Message) -> Action
    ) {
        releaseDue(&shaper, rule: rule, direction: direction, now: now, into: &actions, as: enqueue)
        switch shaper.offer(message, target: target, payload: payload, now: now) {
        case .forward(let message):
            actions.append(enqueue(message))
        case .forwardUnshaped(let message):
            actions.append(enqueue(message))
            actions.append(.shapingTargetsFull(rule: rule, direction: direction))
        case .held(let coalesced) where coalesced > 0:
            actions.append(.count(rule: rule, direction: direction, outcome: .coalesced, by: coalesced))
        case .held:
            // A new interval began: the release timer may need to wake sooner.
            actions.append(.shapingHeld)
        case .unchanged:
            actions.append(.count(rule: rule, direction: direction, outcome: .unchanged, by: 1))
        }
    }

    /// Releases what `shaper` holds whose interval ended by `now`.
    private static func releaseDue<Message: Sendable>(
        _ shaper: inout RateShaper<Instant, Message>, rule: String, direction: MessageDirection, now: Instant,
        into actions: inout [Action], as enqueue: (Message) -> Action
    ) {
        guard let deadline = shaper.nextDeadline, deadline <= now else { return }
        let (releases, unchanged) = shaper.due(now: now)
        for release in releases { actions.append(enqueue(release.message)) }
        if unchanged > 0 { actions.append(.count(rule: rule, direction: direction, outcome: .unchanged, by: unchanged)) }
    }
}
