import BridgeCore
import Durability

/// What one redrive did with a bridge's letters (the control socket's reply adds them up).
struct RedriveReport: Sendable, Equatable {
    /// Delivered by the current rules; the letters are gone.
    var delivered = 0
    /// Dead-lettered again (kept as new letters); the old letters are gone.
    var deadLettered = 0
    /// No rule takes them now: kept.
    var unmatched = 0
    /// The bridge stopped before they were settled: kept.
    var unsettled = 0
    /// Ids asked for that the store does not keep.
    var missing: [String] = []
    /// Letters another redrive holds.
    var busy = 0

    mutating func add(_ other: RedriveReport) {
        delivered += other.delivered
        deadLettered += other.deadLettered
        unmatched += other.unmatched
        unsettled += other.unsettled
        missing += other.missing
        busy += other.busy
    }
}

extension BridgeRuntime {
    /// Routes the selected kept letters again with the current rules, through the outboxes (and
    /// so the spools), oldest first, so that letters of one channel go out in their order; each
    /// letter leaves the store once everything it became is settled — delivered, or dead-lettered
    /// again and kept as a new letter (docs/contract.md §8.3). Returns when every letter is settled
    /// or the bridge stops (those letters stay kept).
    func redrive(_ selection: DeadLetterSelection) async -> RedriveReport {
        let taken = await deadLetters.take(selection)
        let letters = taken.letters
        var report = RedriveReport(missing: taken.missing.map { "\(name):\($0)" }, busy: taken.busy)
        defer { deadLetters.released(letters.map(\.id)) }
        var submitted: [(id: UInt64, toMQTT: UInt64?, toPusher: UInt64?, again: Bool)] = []
        for letter in letters {
            var actions: [Action] = []
            let now = ContinuousClock.now
            let routing = withBridge { machine in
                machine.redriven(DeadLetterKeeper.redriven(letter), receivedAt: .now(), now: now, into: &actions)
            }
            guard routing == .routed else {
                report.unmatched += 1
                metrics.deadLettersRedriven(bridge: name, outcome: "unmatched").increment()
                continue
            }
            var entry: (id: UInt64, toMQTT: UInt64?, toPusher: UInt64?, again: Bool) = (letter.id, nil, nil, false)
            // A message the outbox did not store (its overflow policy dropped it, or the spool refused
            // it) keeps the letter: it is counted `dropped` and the letter stays for a later redrive.
            var notStored = false
            for action in actions {
                switch action {
                case .enqueueToMQTT(let publish, let receivedAt):
                    let admission = toMQTT.append(OutgoingMQTT(publish: publish, receivedAtMillis: receivedAt))
                    account(admission, rule: publish.rule, direction: .pusherToMQTT)
                    if let sequence = admission.sequence { entry.toMQTT = max(entry.toMQTT ?? 0, sequence) } else { notStored = true }
                case .enqueueToPusher(let event, let receivedAt):
                    let admission = toPusher.append(OutgoingPusher(event: event, receivedAtMillis: receivedAt))
                    account(admission, rule: event.rule, direction: .mqttToPusher)
                    if let sequence = admission.sequence { entry.toPusher = max(entry.toPusher ?? 0, sequence) } else { notStored = true }
                case .keepDeadLetter:
                    entry.again = true
                    execute(action)
                case .count, .received, .logDeadLetter, .logDropped, .connectionChanged, .publishStatus, .subscribeChannel,
                    .unsubscribeChannel, .subscribeTopicFilter, .unsubscribeTopicFilter, .shapingHeld, .shapingTargetsFull:
                    execute(action)
                }
            }
            guard !notStored else {
                report.unsettled += 1
                metrics.deadLettersRedriven(bridge: name, outcome: "unsettled").increment()
                continue
            }
            if connection.buffer.persist {
                // In the spool now: after a crash, the restarted daemon settles the letter from there.
                if let sequence = entry.toMQTT { deadLetters.submitted(letter.id, direction: .pusherToMQTT, sequence: sequence) }
                if let sequence = entry.toPusher { deadLetters.submitted(letter.id, direction: .mqttToPusher, sequence: sequence) }
            }
            submitted.append(entry)
        }
        // Settled in the order they went out; each letter is forgotten as soon as its messages are.
        let forever = ContinuousClock.now.advanced(by: .seconds(365 * 86_400))
        for entry in submitted {
            var settled = true
            if let sequence = entry.toMQTT { settled = await toMQTT.waitUntilSettled(through: sequence, deadline: forever) }
            if settled, let sequence = entry.toPusher {
                settled = await toPusher.waitUntilSettled(through: sequence, deadline: forever)
            }
            guard settled else {
                report.unsettled += 1
                metrics.deadLettersRedriven(bridge: name, outcome: "unsettled").increment()
                continue
            }
            await deadLetters.remove([entry.id])
            var again = entry.again
            if let sequence = entry.toPusher, await deadLetters.wasRejected(sequence) { again = true }
            let outcome = again ? "dead_lettered" : "delivered"
            if outcome == "delivered" { report.delivered += 1 } else { report.deadLettered += 1 }
            metrics.deadLettersRedriven(bridge: name, outcome: outcome).increment()
        }
        return report
    }

    /// At start: letters a redrive had put in the spools when the daemon stopped short (a crash, a
    /// shutdown before they were settled). The recovered spools deliver their messages; each letter
    /// is forgotten once those are settled — at once when the spool delivered them before the
    /// crash — so that no second redrive sends them again (docs/contract.md §8.3). Without a spool
    /// (`persist = false`) the messages are gone and the letters stay for the next redrive.
    func resumeRedrives() async {
        let recovered = await deadLetters.recovered()
        guard !recovered.isEmpty else { return }
        defer { deadLetters.released(recovered.map(\.id)) }
        guard connection.buffer.persist else { return }
        logger.info("resuming a redrive cut short: its letters go once the spools settle them", metadata: ["letters": "\(recovered.count)"])
        let forever = ContinuousClock.now.advanced(by: .seconds(365 * 86_400))
        for (id, submissions) in recovered {
            var settled = true
            for submission in submissions where settled {
                let outbox: any SettlingOutbox = submission.direction == 0 ? toMQTT : toPusher
                settled = await outbox.waitUntilSettled(through: submission.sequence, deadline: forever)
            }
            guard settled else { continue }
            await deadLetters.remove([id])
            metrics.deadLettersRedriven(bridge: name, outcome: "delivered").increment()
        }
    }
}

/// The outboxes of both directions, as the redrive waits on them.
protocol SettlingOutbox: Sendable {
    func waitUntilSettled(through sequence: UInt64, deadline: ContinuousClock.Instant) async -> Bool
}

extension Outbox: SettlingOutbox {}
