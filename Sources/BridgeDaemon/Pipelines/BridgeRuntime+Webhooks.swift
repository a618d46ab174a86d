import BridgeCore
import Logging

/// What the webhook listener answers to one request.
struct WebhookReply: Sendable, Equatable {
    /// The HTTP status.
    var status: Int
    /// A short plain-text body.
    var text: String
}

/// Webhooks in (docs/contract.md §7.2): a request for this bridge is checked and translated by
/// BridgeCore's ``WebhookReceiver``; the publishes go into the Pusher → MQTT outbox like any
/// Pusher event (counted in `received_total` and `messages_total{rule="webhooks"}`, so the
/// counters still balance, §7.6), and the reply is 200 only once they are all in it.
///
/// 503 instead (Pusher sends the request again for up to 5 minutes, and the dedupe window lets
/// that retry through): with `persist = false` while MQTT is disconnected (memory-only messages
/// during a broker outage are safer at Pusher), when the outbox would drop something for lack of
/// room (`drop-newest`), when the spool is degraded, and while the bridge is stopping.
///
/// The decisions are the supervisor's (BridgeCore's ``BridgeSupervisor``); no lock is held across
/// the outbox: an accepted request waits for its turn (requests reach the outbox in the order they
/// were decided, so a retained `count` does not go back in time), appends, and hands the turn on.
extension BridgeRuntime {
    /// Whether this bridge takes webhooks (`[bridge.webhooks]` is set).
    var takesWebhooks: Bool { decisions.withLock { $0.supervisor.takesWebhooks } }

    /// Handles one request whose body was read in full (at most 1 MiB).
    func webhookRequest(body: [UInt8], key: String?, signature: String?) async -> WebhookReply {
        let now = ContinuousClock.now
        switch decisions.withLock({ $0.supervisor.webhookRequestReceived(body: body, key: key, signature: signature, now: now) }) {
        case .notEnabled:
            return WebhookReply(status: 404, text: "webhooks are not enabled for this bridge\n")
        case .refused(let refusal):
            return webhookRefused(refusal.outcome, reason: refusal.reason, now: now)
        case .duplicate:
            metrics.webhooks(bridge: name, outcome: .duplicate).increment()
            return WebhookReply(status: 200, text: "duplicate: already published\n")
        case .accepted(let acceptance, let ticket):
            await waitForWebhookTurn(ticket)
            let unavailable = storeWebhookPublishes(acceptance.publishes)
            let done = Self.supervisorNow
            let (waiting, actions) = decisions.withLock { state in
                let (_, actions) = state.supervisor.webhookTurnDone(stored: acceptance, unavailable: unavailable != nil, done)
                return (state.webhookTurns.resumeAll(returning: ()), actions)
            }
            waiting.resume()
            if let reason = unavailable { return webhookRefused(.unavailable, reason: reason, now: now) }
            metrics.webhooks(bridge: name, outcome: .accepted).increment()
            for (outcome, count) in acceptance.skipped { metrics.webhooks(bridge: name, outcome: outcome).increment(by: count) }
            if let unknown = acceptance.skipped[.unknownEvent] {
                logger.debug("webhook events with unknown names skipped", metadata: ["events": "\(unknown)"])
            }
            // Channel discovery (docs/contract.md §7.1) reacts to `channel_occupied` and `subscription_count`.
            execute(actions)
            if !actions.isEmpty { timerWake.continuation.yield() }
            return WebhookReply(status: 200, text: "ok\n")
        }
    }

    /// Returns once it is `ticket`'s turn to append to the outbox (the request before it is done).
    /// Every waiting request is woken when a turn ends and looks whether the next is its own: few
    /// requests wait at once (one per webhook POST in flight).
    private func waitForWebhookTurn(_ ticket: UInt64) async {
        while !decisions.withLock({ $0.supervisor.isWebhookTurn(ticket) }) {
            await decisions.wait(in: { state, queue in queue(&state.webhookTurns) }) {
                $0.supervisor.isWebhookTurn(ticket) ? () : nil
            }
        }
    }

    /// The body was over 1 MiB (seen by the listener from `Content-Length` or while reading).
    func webhookTooLarge() -> WebhookReply {
        webhookRefused(.tooLarge, reason: "body over 1 MiB", now: .now)
    }

    /// Puts an accepted request's publishes into the Pusher → MQTT outbox, each counted as an
    /// arrival; returns why it cannot (then nothing was stored), or `nil` once they are all in.
    private func storeWebhookPublishes(_ publishes: [MQTTPublish]) -> String? {
        let receivedAt = UTCTimestamp.now().millisecondsSince1970
        let items = publishes.map { OutgoingMQTT(publish: $0, receivedAtMillis: receivedAt) }
        if !connection.buffer.persist, !mqttUp.isOpen { return "MQTT is disconnected and persist = false" }
        if !toMQTT.canTakeWithoutLoss(items) {
            return toMQTT.spoolDegraded ? "the spool is degraded" : "the Pusher → MQTT buffer is full or closed"
        }
        guard !items.isEmpty else { return nil }
        receivedToMQTT.increment(by: items.count)
        var stored = true
        for admission in toMQTT.append(contentsOf: items) {
            account(admission, rule: WebhookTranslator.ruleName, direction: .pusherToMQTT)
            if admission.spoolFailed || (admission.dropped > 0 && toMQTT.overflow == .dropNewest) { stored = false }
        }
        // Only a race with another producer gets here: what was stored goes out, the retry may repeat it.
        return stored ? nil : "the Pusher → MQTT buffer refused a message"
    }

    /// Counts a refusal and logs it, at most 10 lines a minute per bridge.
    private func webhookRefused(_ outcome: WebhookOutcome, reason: String, now: ContinuousClock.Instant) -> WebhookReply {
        metrics.webhooks(bridge: name, outcome: outcome).increment()
        if let suppressed = decisions.withLock({ $0.supervisor.webhookRefused(now: now) }) {
            logger.warning(
                "webhook refused",
                metadata: [
                    "http.status": "\(outcome.httpStatus)", "outcome": "\(outcome.rawValue)", "reason": "\(reason)",
                    "suppressed_logs": "\(suppressed)",
                ])
        }
        return WebhookReply(status: outcome.httpStatus, text: "\(outcome.rawValue): \(reason)\n")
    }
}
