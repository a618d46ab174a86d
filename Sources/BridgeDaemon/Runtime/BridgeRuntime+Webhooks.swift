import BridgeCore
import Logging
import PusherProtocol

/// What became of a request under the receiver's lock.
private enum WebhookHandling {
    /// Refused (413, 401, 400): nothing to store.
    case refused(WebhookRefusal)
    /// A repeat within the dedupe window: nothing to store.
    case duplicate
    /// Accepted, but the outbox could not take it (503).
    case unavailable(String)
    /// Accepted and in the outbox.
    case stored(WebhookAcceptance)
}

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
    ///
    /// Checking, translating and appending to the outbox happen under the receiver's lock, so
    /// that concurrent requests reach the outbox in the order their counts were computed (a
    /// retained `count` must not go back in time).
    func webhookRequest(body: [UInt8], key: String?, signature: String?) -> WebhookReply {
        let now = ContinuousClock.now
        let handled: WebhookHandling? = webhooks.withLock { receiver in
            guard let decision = receiver?.requestReceived(body: body, key: key, signature: signature, now: now) else { return nil }
            let acceptance: WebhookAcceptance
            switch decision {
            case .refused(let refusal): return .refused(refusal)
            case .duplicate: return .duplicate
            case .accepted(let accepted): acceptance = accepted
            }
            if let reason = storeWebhookPublishes(acceptance.publishes) {
                receiver?.requestUnavailable(acceptance.digest)
                return .unavailable(reason)
            }
            return .stored(acceptance)
        }
        switch handled {
        case nil:
            return WebhookReply(status: 404, text: "webhooks are not enabled for this bridge\n")
        case .refused(let refusal):
            return webhookRefused(refusal.outcome, reason: refusal.reason, now: now)
        case .duplicate:
            metrics.webhooks(bridge: name, outcome: .duplicate).increment()
            return WebhookReply(status: 200, text: "duplicate: already published\n")
        case .unavailable(let reason):
            return webhookRefused(.unavailable, reason: reason, now: now)
        case .stored(let acceptance):
            metrics.webhooks(bridge: name, outcome: .accepted).increment()
            for (outcome, count) in acceptance.skipped { metrics.webhooks(bridge: name, outcome: outcome).increment(by: count) }
            if let unknown = acceptance.skipped[.unknownEvent] {
                logger.debug("webhook events with unknown names skipped", metadata: ["events": "\(unknown)"])
            }
            webhookEventsAccepted(acceptance.events, timeMillis: acceptance.timeMillis)
            return WebhookReply(status: 200, text: "ok\n")
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
    /// Channel discovery (docs/contract.md §7.1) reacts to `channel_occupied` (join, poll the
    /// prefix at once) and `subscription_count` (leave when only the bridge is left), each count
    /// dated by the request's `time_ms` (`timeMillis`).
    func webhookEventsAccepted(_ events: [PusherWebhookEvent], timeMillis: Int64?) {
        let nowMillis = UTCTimestamp.now().millisecondsSince1970
        let asOf = ChannelDiscovery.webhookCountAsOf(timeMillis: timeMillis, nowMillis: nowMillis, now: .now)
        for event in events {
            switch event.kind {
            case .channelOccupied:
                discoveryChannelOccupied(event.channel)
            case .subscriptionCount:
                if let count = event.subscriptionCount { discoveryWebhookCount(event.channel, count: count, asOf: asOf) }
            default:
                break
            }
        }
    }
}
