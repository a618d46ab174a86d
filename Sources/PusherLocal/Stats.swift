/// A snapshot of one app's counters (control endpoint `GET /pusher-local/apps/ID/stats`).
public struct PusherLocalStats: Sendable, Equatable {
    /// Open connections now.
    public var connections: Int
    /// Subscribed connections per occupied channel.
    public var subscriptions: [String: Int]
    /// Counters since start.
    public var counters: AppCounters
    /// Webhook counters since start (all zero without `--webhook`).
    public var webhooks = WebhookCounters()

    /// As JSON text.
    public var json: String {
        let subs = subscriptions.keys.sorted().map { jsonQuoted($0) + ":" + String(subscriptions[$0] ?? 0) }.joined(separator: ",")
        return "{\"connections\":\(connections),\"subscriptions\":{\(subs)},\"connections_opened\":\(counters.connectionsOpened),"
            + "\"connections_refused\":\(counters.connectionsRefused),\"events_published\":\(counters.eventsPublished),\"client_events\":\(counters.clientEvents),"
            + "\"events_delivered\":\(counters.framesDelivered),\"bad_frames\":\(counters.badFrames),"
            + "\"refused_subscriptions\":\(counters.refusedSubscriptions),\"refused_client_events\":\(counters.refusedClientEvents),"
            + "\"webhooks_posted\":\(webhooks.posted),\"webhook_events_posted\":\(webhooks.eventsPosted),"
            + "\"webhooks_failed\":\(webhooks.failed),\"webhooks_retried\":\(webhooks.retried),"
            + "\"webhooks_given_up\":\(webhooks.givenUp),\"webhook_events_given_up\":\(webhooks.eventsGivenUp),"
            + "\"webhook_events_dropped\":\(webhooks.eventsDropped)}"
    }
}

extension LiveApp {
    func stats() -> PusherLocalStats {
        var stats = state.withLock { state in
            PusherLocalStats(
                connections: state.hub.connectionCount, subscriptions: state.hub.subscriptionsPerChannel, counters: state.hub.counters)
        }
        if let webhooks { stats.webhooks = webhooks.counters(appID: app.id) }
        return stats
    }
}
