import PusherProtocol

/// A webhook event as pusher-local posts it (docs/pusher-protocol.md §2, "Webhooks"); the I/O
/// owner batches, stamps `time_ms`, signs and posts it.
extension PusherWebhookEvent {
    /// The event as a JSON object, in the field names Pusher uses.
    var json: String {
        var out = "{\"name\":" + jsonQuoted(name) + ",\"channel\":" + jsonQuoted(channel)
        if let userID { out += ",\"user_id\":" + jsonQuoted(userID) }
        if let event { out += ",\"event\":" + jsonQuoted(event) }
        if let data { out += ",\"data\":" + jsonQuoted(data) }
        if let socketID { out += ",\"socket_id\":" + jsonQuoted(socketID) }
        if let subscriptionCount { out += ",\"subscription_count\":" + String(subscriptionCount) }
        return out + "}"
    }
}

/// The decisions of one Pusher app: connections, subscriptions, presence members, the cache of
/// cache channels, client events and HTTP publishes (docs/pusher-protocol.md §1–2).
///
/// A pure state machine: no I/O, no clock reads, no logging. Each event method returns the
/// ``HubAction``s the I/O owner carries out. Time comes in as `now`.
public struct AppHub: Sendable {
    /// The app's credentials.
    public let app: PusherLocalApp
    /// `activity_timeout` announced in `connection_established`, in seconds.
    public var activityTimeoutSeconds: Int
    /// How long a cache channel keeps its last event (hosted Pusher: 30 minutes).
    public var cacheLifetime: Duration = .seconds(30 * 60)
    /// Whether changes of a non-presence channel's connection count are announced: to its
    /// subscribers as `pusher_internal:subscription_count` and as a `subscription_count` webhook
    /// (hosted Pusher's per-app "subscription count" setting; `--subscription-count`).
    public var subscriptionCountEvents = false
    /// Whether signed-in users' watchlists get `pusher_internal:watchlist_events` (hosted
    /// Pusher's per-app "watchlist events" setting, off by default; `--watchlist-events`).
    public var watchlistEvents = false
    /// How long a connection may stay without signing in before it is closed with 4009 (hosted
    /// Pusher's per-app user authentication timeout); `nil`: never (the default). The I/O owner
    /// keeps the time and calls ``signinDeadlineReached(_:)``.
    public var signinTimeout: Duration?

    struct Connection {
        var socketID: String
        /// The client's address, `ip:port`, when the I/O owner knows it (connections endpoint).
        var remote: String?
        var channels: Set<String> = []
        /// presence channel → the user id this connection joined as.
        var presenceUser: [String: String] = [:]
        var clientEventWindowStart: ContinuousClock.Instant?
        var clientEventsInWindow = 0
        /// The user this connection signed in as (`pusher:signin`), if it did.
        var userID: String?
        /// The user ids it watches (only with ``watchlistEvents`` on).
        var watchlist: [String] = []
    }

    struct Member {
        var info: JSONValue
        var connections: Int
    }

    struct Channel {
        var subscribers: Set<ConnectionID> = []
        var memberOrder: [String] = []
        var members: [String: Member] = [:]
    }

    struct CachedEvent {
        var frame: String
        var storedAt: ContinuousClock.Instant
    }

    var connections: [ConnectionID: Connection] = [:]
    var socketIndex: [String: ConnectionID] = [:]
    var channels: [String: Channel] = [:]
    var cache: [String: CachedEvent] = [:]
    /// Signed-in user id → its signed-in connections (a user is online while this is non-empty).
    var users: [String: Set<ConnectionID>] = [:]
    /// Watched user id → the connections whose watchlist names it.
    var watchers: [String: Set<ConnectionID>] = [:]
    /// The app's counters (`internal(set)`: the hub's extension files count too).
    public internal(set) var counters = AppCounters()

    public init(app: PusherLocalApp, activityTimeoutSeconds: Int, subscriptionCountEvents: Bool = false) {
        self.app = app
        self.activityTimeoutSeconds = activityTimeoutSeconds
        self.subscriptionCountEvents = subscriptionCountEvents
    }

    // MARK: connections

    /// Number of open connections.
    public var connectionCount: Int { connections.count }

    /// Whether `socketID` is in use by an open connection.
    public func isSocketIDInUse(_ socketID: String) -> Bool { socketIndex[socketID] != nil }

    /// A connection was accepted and given `socketID`: greet it (docs/pusher-protocol.md §1, "Handshake").
    /// `remote` is the client's `ip:port`, kept for the connections endpoint.
    public mutating func connected(_ id: ConnectionID, socketID: String, remote: String? = nil) -> [HubAction] {
        connections[id] = Connection(socketID: socketID, remote: remote)
        socketIndex[socketID] = id
        counters.connectionsOpened += 1
        return [.send(id, ServerFrame.connectionEstablished(socketID: socketID, activityTimeout: activityTimeoutSeconds))]
    }

    /// A connection ended: it leaves every channel (member_removed, channel_vacated), and its
    /// user goes offline if this was the user's last signed-in connection.
    public mutating func disconnected(_ id: ConnectionID) -> [HubAction] {
        // Its channel names and socket id, not the Connection: a copy of it would share its channel
        // set, and each leave's remove would copy the set (quadratic for a connection holding
        // 100,000 channels: Benchmarks/fleet/bench_fleet.py).
        guard let (held, socketID) = connections[id].map({ ($0.channels.sorted(), $0.socketID) }) else { return [] }
        var actions = signedOut(id)
        for channel in held {
            actions += leave(id, channel: channel)
        }
        connections[id] = nil
        socketIndex[socketID] = nil
        return actions
    }

    /// A connection was opened and refused at once by the control switch (counted, not kept).
    public mutating func refused() {
        counters.connectionsOpened += 1
        counters.connectionsRefused += 1
    }

    /// Close every open connection with `code` (control endpoint; e.g. 4200 to provoke a reconnect).
    public func closeAll(code: UInt16, reason: String) -> [HubAction] {
        connections.keys.sorted().map { .close($0, code: code, reason: reason) }
    }

    /// Close the one open connection with Pusher socket id `socketID` with `code` (control
    /// endpoint; e.g. 4200 to one of a client's redundant connections); nil when no open
    /// connection has that socket id.
    public func close(socketID: String, code: UInt16, reason: String) -> [HubAction]? {
        guard let id = socketIndex[socketID], connections[id] != nil else { return nil }
        return [.close(id, code: code, reason: reason)]
    }

    /// Every open connection, for raw frames from the control endpoint.
    public var connectionIDs: [ConnectionID] { connections.keys.sorted() }

    // MARK: frames from clients

    /// A text frame arrived from a client.
    public mutating func received(_ text: String, from id: ConnectionID, now: ContinuousClock.Instant, answerPings: Bool = true)
        -> [HubAction]
    {
        guard connections[id] != nil else { return [] }
        let message: JSONValue
        do {
            message = try JSONValue.parse(text)
        } catch {
            counters.badFrames += 1
            return [.send(id, ServerFrame.error("Invalid JSON: \(error.message) at byte \(error.offset)", code: nil))]
        }
        guard let event = message["event"]?.stringValue else {
            counters.badFrames += 1
            return [.send(id, ServerFrame.error("Frame has no string 'event' field", code: nil))]
        }
        switch event {
        case "pusher:ping":
            return answerPings ? [.send(id, ServerFrame.pong)] : []
        case "pusher:pong":
            return []
        case "pusher:subscribe":
            guard let data = Self.objectData(message["data"]) else {
                counters.badFrames += 1
                counters.refusedSubscriptions += 1
                return [.send(id, ServerFrame.error("pusher:subscribe needs a data object", code: nil))]
            }
            return subscribe(id, data: data, now: now)
        case "pusher:signin":
            guard let data = Self.objectData(message["data"]) else {
                counters.badFrames += 1
                counters.refusedSignins += 1
                return [.send(id, ServerFrame.error("pusher:signin needs a data object", code: nil))]
            }
            return signin(id, data: data)
        case "pusher:unsubscribe":
            guard let data = Self.objectData(message["data"]), let channel = data["channel"]?.stringValue else {
                counters.badFrames += 1
                return [.send(id, ServerFrame.error("pusher:unsubscribe needs data.channel", code: nil))]
            }
            guard connections[id]?.channels.contains(channel) == true else { return [] }
            return leave(id, channel: channel)
        default:
            if EventName.isClientEvent(event) {
                return clientEvent(id, event: event, message: message, now: now)
            }
            counters.badFrames += 1
            if EventName.isProtocolEvent(event) {
                return [.send(id, ServerFrame.error("Unsupported event \(event)", code: nil))]
            }
            return [.send(id, ServerFrame.error("Client event names must start with 'client-'", code: nil))]
        }
    }

    /// `data` of a client→server frame: an object, or (lenient) a string holding an object.
    static func objectData(_ value: JSONValue?) -> JSONValue? {
        switch value {
        case .object?: return value
        case .string(let text)?:
            if let parsed = try? JSONValue.parse(text), case .object = parsed { return parsed }
            return nil
        default: return nil
        }
    }
}
