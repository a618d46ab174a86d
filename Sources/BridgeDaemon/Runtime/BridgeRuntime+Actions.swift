import BridgeCore

/// The bridge machine's actions carried out (BridgeRuntime.swift's runtime): outbox appends and
/// counters here and now; what must await a client goes to the command runner.
extension BridgeRuntime {
    // MARK: Carrying out the machine's actions

    /// Carries out the bridge machine's actions in order. Outbox appends and counters happen here
    /// and now; what must await a client goes to the command runner.
    func execute(_ actions: [Action]) {
        for action in actions { execute(action) }
    }

    func execute(_ action: Action) {
        switch action {
        case .enqueueToMQTT(let publish, let receivedAt):
            let admission = toMQTT.append(OutgoingMQTT(publish: publish, receivedAtMillis: receivedAt))
            account(admission, rule: publish.rule, direction: .pusherToMQTT)
        case .enqueueToPusher(let event, let receivedAt):
            let admission = toPusher.append(OutgoingPusher(event: event, receivedAtMillis: receivedAt))
            account(admission, rule: event.rule, direction: .mqttToPusher)
        case .count(let rule, let direction, let outcome, let count):
            metrics.messages(bridge: name, rule: rule, direction: direction, outcome: outcome).increment(by: count)
            if outcome == .deadLettered { homeAssistantTally.deadLetters.add(count, ordering: .relaxed) }
        case .received(let direction, let count):
            (direction == .pusherToMQTT ? receivedToMQTT : receivedToPusher).increment(by: count)
        case .logDeadLetter(let letter, let suppressed):
            logger.warning(
                "message dead-lettered",
                metadata: [
                    "bridge.rule": "\(letter.rule)", "reason": "\(letter.reason)", "source": "\(letter.source)",
                    "suppressed_logs": "\(suppressed)",
                ])
        case .keepDeadLetter(let letter, let direction):
            deadLetters.keep(letter, direction: direction, atMillis: UTCTimestamp.now().millisecondsSince1970)
        case .logDropped(let rule, let direction, let dropped, let suppressed):
            logger.warning(
                "buffer full: message dropped",
                metadata: [
                    "bridge.rule": "\(rule)", "direction": "\(direction.rawValue)", "dropped": "\(dropped)",
                    "suppressed_logs": "\(suppressed)",
                ])
        case .connectionChanged(let side, let up, let reconnected):
            metrics.connectionUp(bridge: name, side: side).record(up ? 1 : 0)
            if reconnected { metrics.reconnects(bridge: name, side: side).increment() }
            homeAssistantInput { $0.connectionChanged(now: $1) }
        case .subscribeChannel(let channel):
            // Only from `started` and `rulesReplaced`, which the supervisor lifts (in a cluster the
            // member holding a channel subscribes): never seen here in a cluster.
            subscribeEverywhere(channel)
        case .unsubscribeChannel(let channel):
            unsubscribeEverywhere(channel)
        case .publishStatus, .subscribeTopicFilter, .unsubscribeTopicFilter:
            commands.continuation.yield(action)
        case .shapingHeld:
            // A `throttle` interval began: its end may be the supervisor's next deadline.
            timerWake.continuation.yield()
        case .shapingTargetsFull(let rule, _):
            metrics.throttleTargetsFull(bridge: name, rule: rule).increment()
        }
    }

    /// Counts what the outbox's admission dropped or could not store.
    func account(_ admission: OutboxAdmission, rule: String, direction: MessageDirection) {
        if admission.dropped > 0 {
            let now = ContinuousClock.now
            var actions: [Action] = []
            withBridge { $0.dropped(admission.dropped, rule: rule, direction: direction, now: now, into: &actions) }
            execute(actions)
        }
        if admission.spoolFailed {
            // Not stored: the message is lost, and counted as such (docs/contract.md §7.6).
            metrics.errors(bridge: name, kind: "spool").increment()
            metrics.messages(bridge: name, rule: rule, direction: direction, outcome: .dropped).increment()
        }
    }
}
