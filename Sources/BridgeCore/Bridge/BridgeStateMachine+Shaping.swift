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
            guard let deadline = table.toPusher[rule]?.nextDeadline, deadline <= now else { continue }
            let (releases, unchanged) = table.toPusher[rule]!.due(now: now)
            for release in releases {
                actions.append(.enqueueToPusher(release.message.event, receivedAtMillis: release.message.receivedAtMillis))
            }
            if unchanged > 0 { actions.append(.count(rule: rule, direction: .mqttToPusher, outcome: .unchanged, by: unchanged)) }
        }
        for rule in table.toMQTT.keys.sorted() {
            guard let deadline = table.toMQTT[rule]?.nextDeadline, deadline <= now else { continue }
            let (releases, unchanged) = table.toMQTT[rule]!.due(now: now)
            for release in releases {
                actions.append(.enqueueToMQTT(release.message.publish, receivedAtMillis: release.message.receivedAtMillis))
            }
            if unchanged > 0 { actions.append(.count(rule: rule, direction: .pusherToMQTT, outcome: .unchanged, by: unchanged)) }
        }
    }

    /// An MQTT → Pusher event of a rule with `throttle`/`on_change`: forwarded, held or dropped.
    mutating func shape(_ event: PusherEventPublish, receivedAtMillis: Int64, now: Instant, into actions: inout [Action]) {
        let target = event.channel + " " + event.event  // a space is in neither name: unambiguous
        let held = ShapedPusherEvent(event: event, receivedAtMillis: receivedAtMillis)
        // An interval that ended before the timer ran is closed first: its message goes out.
        if let deadline = shaping.toPusher[event.rule]?.nextDeadline, deadline <= now {
            let (releases, unchanged) = shaping.toPusher[event.rule]!.due(now: now)
            for release in releases {
                actions.append(.enqueueToPusher(release.message.event, receivedAtMillis: release.message.receivedAtMillis))
            }
            if unchanged > 0 { actions.append(.count(rule: event.rule, direction: .mqttToPusher, outcome: .unchanged, by: unchanged)) }
        }
        guard let offer = shaping.toPusher[event.rule]?.offer(held, target: target, payload: Array(event.data.utf8), now: now) else {
            actions.append(.enqueueToPusher(event, receivedAtMillis: receivedAtMillis))
            return
        }
        switch offer {
        case .forward(let message):
            actions.append(.enqueueToPusher(message.event, receivedAtMillis: message.receivedAtMillis))
        case .forwardUnshaped(let message):
            actions.append(.enqueueToPusher(message.event, receivedAtMillis: message.receivedAtMillis))
            actions.append(.shapingTargetsFull(rule: event.rule, direction: .mqttToPusher))
        case .held(let coalesced):
            shaped(coalesced: coalesced, rule: event.rule, direction: .mqttToPusher, into: &actions)
        case .unchanged:
            actions.append(.count(rule: event.rule, direction: .mqttToPusher, outcome: .unchanged, by: 1))
        }
    }

    /// A Pusher → MQTT publish of a rule with `throttle`/`on_change`: forwarded, held or dropped.
    mutating func shape(_ publish: MQTTPublish, receivedAtMillis: Int64, now: Instant, into actions: inout [Action]) {
        let held = ShapedMQTTPublish(publish: publish, receivedAtMillis: receivedAtMillis)
        if let deadline = shaping.toMQTT[publish.rule]?.nextDeadline, deadline <= now {
            let (releases, unchanged) = shaping.toMQTT[publish.rule]!.due(now: now)
            for release in releases {
                actions.append(.enqueueToMQTT(release.message.publish, receivedAtMillis: release.message.receivedAtMillis))
            }
            if unchanged > 0 { actions.append(.count(rule: publish.rule, direction: .pusherToMQTT, outcome: .unchanged, by: unchanged)) }
        }
        guard let offer = shaping.toMQTT[publish.rule]?.offer(held, target: publish.topic, payload: publish.payload, now: now) else {
            actions.append(.enqueueToMQTT(publish, receivedAtMillis: receivedAtMillis))
            return
        }
        switch offer {
        case .forward(let message):
            actions.append(.enqueueToMQTT(message.publish, receivedAtMillis: message.receivedAtMillis))
        case .forwardUnshaped(let message):
            actions.append(.enqueueToMQTT(message.publish, receivedAtMillis: message.receivedAtMillis))
            actions.append(.shapingTargetsFull(rule: publish.rule, direction: .pusherToMQTT))
        case .held(let coalesced):
            shaped(coalesced: coalesced, rule: publish.rule, direction: .pusherToMQTT, into: &actions)
        case .unchanged:
            actions.append(.count(rule: publish.rule, direction: .pusherToMQTT, outcome: .unchanged, by: 1))
        }
    }

    private func shaped(coalesced: Int, rule: String, direction: MessageDirection, into actions: inout [Action]) {
        if coalesced > 0 {
            actions.append(.count(rule: rule, direction: direction, outcome: .coalesced, by: coalesced))
        } else {
            // A new interval began: the release timer may need to wake sooner.
            actions.append(.shapingHeld)
        }
    }
}
