import NIOCore

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
    /// Users with at least one signed-in connection now.
    public var onlineUsers = 0

    /// As JSON text.
    public var json: String {
        let subs = subscriptions.keys.sorted().map { jsonQuoted($0) + ":" + String(subscriptions[$0] ?? 0) }.joined(separator: ",")
        return "{\"connections\":\(connections),\"subscriptions\":{\(subs)},\"connections_opened\":\(counters.connectionsOpened),"
            + "\"connections_refused\":\(counters.connectionsRefused),\"events_published\":\(counters.eventsPublished),\"client_events\":\(counters.clientEvents),"
            + "\"events_delivered\":\(counters.framesDelivered),\"bad_frames\":\(counters.badFrames),"
            + "\"refused_subscriptions\":\(counters.refusedSubscriptions),\"refused_client_events\":\(counters.refusedClientEvents),"
            + "\"users_online\":\(onlineUsers),\"signins\":\(counters.signins),\"refused_signins\":\(counters.refusedSignins),"
            + "\"watchlists_truncated\":\(counters.watchlistsTruncated),\"watchlist_events\":\(counters.watchlistEvents),"
            + "\"connections_terminated\":\(counters.connectionsTerminated),\"signin_timeouts\":\(counters.signinTimeouts),"
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
                connections: state.hub.connectionCount, subscriptions: state.hub.subscriptionsPerChannel, counters: state.hub.counters,
                onlineUsers: state.hub.onlineUserCount)
        }
        if let webhooks { stats.webhooks = webhooks.counters(appID: app.id) }
        return stats
    }
}

/// One open connection as the connections endpoint shows it (`GET /pusher-local/apps/ID/connections`):
/// which channels each client holds, from the server's own records.
public struct ConnectionRecord: Sendable, Equatable {
    /// The Pusher socket id given in `pusher:connection_established`.
    public var socketID: String
    /// The channels the connection is subscribed to, sorted.
    public var channels: [String]
    /// The user id of its first presence channel (by name), if it joined one.
    public var userID: String?
    /// The client's address, `ip:port` (nil when the server did not know it).
    public var remote: String?
    /// The user it signed in as (`pusher:signin`), if it did.
    public var signedInAs: String?

    /// Creates a record.
    public init(socketID: String, channels: [String], userID: String? = nil, remote: String? = nil, signedInAs: String? = nil) {
        self.socketID = socketID
        self.channels = channels
        self.userID = userID
        self.remote = remote
        self.signedInAs = signedInAs
    }

    /// As a JSON object: `{"socket_id","channels":[…],"user_id"?,"remote"?,"signed_in_as"?}`.
    public var json: String {
        var out = "{\"socket_id\":" + jsonQuoted(socketID) + ",\"channels\":[" + channels.map(jsonQuoted).joined(separator: ",") + "]"
        if let userID { out += ",\"user_id\":" + jsonQuoted(userID) }
        if let remote { out += ",\"remote\":" + jsonQuoted(remote) }
        if let signedInAs { out += ",\"signed_in_as\":" + jsonQuoted(signedInAs) }
        return out + "}"
    }

    /// A list of records as one JSON array.
    public static func json(_ records: [ConnectionRecord]) -> String {
        "[" + records.map(\.json).joined(separator: ",") + "]"
    }
}

extension AppHub {
    /// Every open connection with its channels, in the order the connections were opened.
    public var connectionRecords: [ConnectionRecord] {
        connections.keys.sorted().compactMap { id in
            guard let connection = connections[id] else { return nil }
            let firstPresence = connection.presenceUser.keys.sorted().first
            return ConnectionRecord(
                socketID: connection.socketID, channels: connection.channels.sorted(),
                userID: firstPresence.flatMap { connection.presenceUser[$0] }, remote: connection.remote, signedInAs: connection.userID)
        }
    }
}

extension PusherLocalServer {
    /// `ip:port` of a peer (`[ip]:port` for IPv6); nil for an address without a port (a Unix socket).
    static func hostAndPort(_ address: SocketAddress) -> String? {
        guard let ip = address.ipAddress, let port = address.port else { return nil }
        return (ip.contains(":") ? "[\(ip)]" : ip) + ":\(port)"
    }
}
