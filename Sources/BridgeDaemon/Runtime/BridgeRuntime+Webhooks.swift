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
extension BridgeRuntime {
    /// Whether this bridge takes webhooks (`[bridge.webhooks]` is set).
    var takesWebhooks: Bool { webhooks.withLock { $0 != nil } }

    /// Handles one request whose body was read in full (at most 1 MiB).
    func webhookRequest(body: [UInt8], key: String?, signature: String?) -> WebhookReply {
        let now = ContinuousClock.now
        guard let decision = webhooks.withLock({ $0?.requestReceived(body: body, key: key, signature: signature, now: now) }) else {
            return WebhookReply(status: 404, text: "webhooks are not enabled for this bridge\n")
        }
        switch decision {
        case .refused(let refusal):
            return webhookRefused(refusal.outcome, reason: refusal.reason, now: now)
        case .duplicate:
            metrics.webhooks(bridge: name, outcome: .duplicate).increment()
            return WebhookReply(status: 200, text: "duplicate: already published\n")
        case .accepted(let acceptance):
            return webhookAccepted(acceptance, now: now)
        }
    }

    /// The body was over 1 MiB (seen by the listener from `Content-Length` or while reading).
    func webhookTooLarge() -> WebhookReply {
        webhookRefused(.tooLarge, reason: "body over 1 MiB", now: .now)
    }

    private func webhookAccepted(_ acceptance: WebhookAcceptance, now: ContinuousClock.Instant) -> WebhookReply {
        let receivedAt = UTCTimestamp.now().millisecondsSince1970
        let items = acceptance.publishes.map { OutgoingMQTT(publish: $0, receivedAtMillis: receivedAt) }
        var unavailable: String?
        if !connection.buffer.persist, !mqttUp.isOpen {
            unavailable = "MQTT is disconnected and persist = false"
        } else if !toMQTT.canTakeWithoutLoss(items) {
            unavailable = toMQTT.spoolDegraded ? "the spool is degraded" : "the Pusher → MQTT buffer is full or closed"
        }
        if unavailable == nil, !items.isEmpty {
            receivedToMQTT.increment(by: items.count)
            var stored = true
            for admission in toMQTT.append(contentsOf: items) {
                account(admission, rule: WebhookTranslator.ruleName, direction: .pusherToMQTT)
                if admission.spoolFailed || (admission.dropped > 0 && toMQTT.overflow == .dropNewest) { stored = false }
            }
            if !stored { unavailable = "the Pusher → MQTT buffer refused a message" }
        }
        if let unavailable {
            webhooks.withLock { $0?.requestUnavailable(acceptance.digest) }
            return webhookRefused(.unavailable, reason: unavailable, now: now)
        }
        metrics.webhooks(bridge: name, outcome: .accepted).increment()
        for (outcome, count) in acceptance.skipped { metrics.webhooks(bridge: name, outcome: outcome).increment(by: count) }
        if let unknown = acceptance.skipped[.unknownEvent] {
            logger.debug("webhook events with unknown names skipped", metadata: ["events": "\(unknown)"])
        }
        webhookEventsAccepted(acceptance.events)
        return WebhookReply(status: 200, text: "ok\n")
    }

    /// Counts a refusal and logs it, at most 10 lines a minute per bridge.
    private func webhookRefused(_ outcome: WebhookOutcome, reason: String, now: ContinuousClock.Instant) -> WebhookReply {
        metrics.webhooks(bridge: name, outcome: outcome).increment()
        let (allowed, suppressed) = webhookRefusalLog.withLock { $0.allow(now: now) }
        if allowed {
            logger.warning(
                "webhook refused",
                metadata: [
                    "http.status": "\(outcome.httpStatus)", "outcome": "\(outcome.rawValue)", "reason": "\(reason)",
                    "suppressed_logs": "\(suppressed)",
                ])
        }
        return WebhookReply(status: outcome.httpStatus, text: "\(outcome.rawValue): \(reason)\n")
    }

    /// `[bridge.webhooks]` after a reload: enabled, changed (members known so far are kept) or removed.
    func webhookSettingsChanged(_ settings: BridgeSettings) {
        webhooks.withLock { receiver in
            guard let new = settings.webhooks else {
                receiver = nil
                return
            }
            if receiver != nil {
                receiver?.settingsChanged(to: new)
            } else {
                receiver = WebhookReceiver(settings: settings)
            }
        }
    }

    /// Called once a request was accepted and its publishes are in the outbox.
    func webhookEventsAccepted(_ events: [PusherWebhookEvent]) {
        // Channel discovery (docs/contract.md §7.1) reacts to channel_occupied and subscription_count here; wired by the lead.
    }
}
