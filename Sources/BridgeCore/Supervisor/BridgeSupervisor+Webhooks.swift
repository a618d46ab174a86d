import PusherProtocol

/// Webhooks in (docs/contract.md §7.2): a request is checked and translated by
/// ``WebhookReceiver``; its refusals are logged at most ten times a minute; accepted requests take
/// a turn (``Turns``) so that they reach the Pusher → MQTT outbox in the order they were decided (a
/// retained `count` must not go back in time) while the runtime holds no lock across the outbox;
/// and discovery hears of `channel_occupied` and `subscription_count` (§7.1).
extension BridgeSupervisor {
    /// What became of a request.
    public enum WebhookHandling: Sendable, Equatable {
        /// `[bridge.webhooks]` is not set.
        case notEnabled
        /// Refused (413, 401, 400): nothing to store.
        case refused(WebhookRefusal)
        /// A repeat within the dedupe window: nothing to store.
        case duplicate
        /// Accepted: its publishes go into the outbox on the ticket's turn.
        case accepted(WebhookAcceptance, ticket: UInt64)
    }

    /// Whether this bridge takes webhooks (`[bridge.webhooks]` is set).
    public var takesWebhooks: Bool { webhooks != nil }

    /// A request whose body was read in full (at most 1 MiB).
    public mutating func webhookRequestReceived(body: [UInt8], key: String?, signature: String?, now: Instant) -> WebhookHandling {
        guard let decision = webhooks?.requestReceived(body: body, key: key, signature: signature, now: now) else { return .notEnabled }
        switch decision {
        case .refused(let refusal): return .refused(refusal)
        case .duplicate: return .duplicate
        case .accepted(let acceptance): return .accepted(acceptance, ticket: webhookTurns.take())
        }
    }

    /// Whether it is `ticket`'s turn to append to the outbox.
    public func isWebhookTurn(_ ticket: UInt64) -> Bool { webhookTurns.current == ticket }

    /// The request holding the turn is done: stored (its events go to discovery, the request's
    /// `time_ms` dating the counts), or not (`digest` is forgotten by the dedupe window, so that
    /// Pusher's retry goes through). Returns the ticket whose turn it is now, and discovery's actions.
    public mutating func webhookTurnDone(stored acceptance: WebhookAcceptance, unavailable: Bool, _ now: Now) -> (next: UInt64, [Action]) {
        let next = webhookTurns.done()
        if unavailable {
            webhooks?.requestUnavailable(acceptance.digest)
            return (next, [])
        }
        let asOf = ChannelDiscovery.webhookCountAsOf(timeMillis: acceptance.timeMillis, nowMillis: now.millis, now: now.instant)
        var actions: [Action] = []
        for event in acceptance.events {
            switch event.kind {
            case .channelOccupied:
                actions += channelOccupied(event.channel, now)
            case .subscriptionCount:
                if let count = event.subscriptionCount { actions += webhookSubscriptionCount(event.channel, count: count, asOf: asOf, now) }
            case .channelVacated, .memberAdded, .memberRemoved, .clientEvent, .cacheMiss, nil:
                break
            }
        }
        return (next, actions)
    }

    /// A refusal is logged when this returns a number (the lines left out since the last one).
    public mutating func webhookRefused(now: Instant) -> Int? {
        let (log, suppressed) = webhookRefusalLog.allow(now: now)
        return log ? suppressed : nil
    }

    /// `[bridge.webhooks]` after a reload: enabled, changed (members known so far are kept) or removed.
    mutating func webhookSettingsChanged(_ settings: BridgeSettings) {
        guard let new = settings.webhooks else {
            webhooks = nil
            return
        }
        if webhooks != nil {
            webhooks?.settingsChanged(to: new)
        } else {
            webhooks = WebhookReceiver(settings: settings)
        }
    }
}
