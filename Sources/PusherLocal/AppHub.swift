import PusherProtocol

/// Identifies one WebSocket connection inside pusher-local (not the Pusher socket id).
public struct ConnectionID: Hashable, Sendable, Comparable, CustomStringConvertible {
    public let rawValue: UInt64
    public init(_ rawValue: UInt64) { self.rawValue = rawValue }
    public static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }
    public var description: String { "#\(rawValue)" }
}

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

/// What the I/O owner must do after the hub took a decision.
public enum HubAction: Sendable, Equatable {
    /// Send one text frame to one connection.
    case send(ConnectionID, String)
    /// Send one encoded frame to many connections: a publish is encoded once, not once per
    /// subscriber.
    case deliver(String, to: [ConnectionID])
    /// Close one connection with a WebSocket close code (docs/pusher-protocol.md §1, "Close codes").
    case close(ConnectionID, code: UInt16, reason: String)
    /// Post a webhook event.
    case webhook(PusherWebhookEvent)
}

/// An HTTP API failure: status and a plain-text body (docs/pusher-protocol.md §2, "Statuses").
public struct APIError: Error, Sendable, Equatable {
    public var status: Int
    public var message: String
    public init(status: Int, message: String) {
        self.status = status
        self.message = message
    }
    static func badRequest(_ message: String) -> APIError { APIError(status: 400, message: message) }
    static func tooLarge(_ message: String) -> APIError { APIError(status: 413, message: message) }
    /// What a publish gets while the app is over its message quota (the control switch `quota`):
    /// status 403, as hosted Pusher answers an app over quota or disabled, with a one-line text body.
    static let overQuota = APIError(status: 403, message: "Over quota")
}

/// One event to publish through the HTTP API (`/events` names many channels; `/batch_events`
/// one per item).
public struct PublishRequest: Sendable, Equatable {
    public var name: String
    public var data: String
    public var channels: [String]
    public var socketID: String?
    public var info: [String]

    public init(name: String, data: String, channels: [String], socketID: String? = nil, info: [String] = []) {
        self.name = name
        self.data = data
        self.channels = channels
        self.socketID = socketID
        self.info = info
    }
}

/// Counters of one app, readable through the control endpoint.
public struct AppCounters: Sendable, Equatable {
    /// WebSocket connections opened since start, including those refused by the control switch
    /// (so a reconnect loop against a refusing server can be counted).
    public var connectionsOpened = 0
    /// Connections closed at once because the control switch refused them.
    public var connectionsRefused = 0
    /// Events published through the HTTP API (one per channel named).
    public var eventsPublished = 0
    /// Client events accepted and relayed.
    public var clientEvents = 0
    /// Channel-event frames handed to connections (publishes × recipients, client events, cache replays).
    public var framesDelivered = 0
    /// Frames from clients that could not be understood.
    public var badFrames = 0
    /// Subscriptions refused (bad auth, bad names, double subscription, …).
    public var refusedSubscriptions = 0
    /// Client events refused (not subscribed, wrong channel kind, rate limit, …).
    public var refusedClientEvents = 0
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

    struct Connection {
        var socketID: String
        /// The client's address, `ip:port`, when the I/O owner knows it (connections endpoint).
        var remote: String?
        var channels: Set<String> = []
        /// presence channel → the user id this connection joined as.
        var presenceUser: [String: String] = [:]
        var clientEventWindowStart: ContinuousClock.Instant?
        var clientEventsInWindow = 0
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

    /// A connection ended: it leaves every channel (member_removed, channel_vacated).
    public mutating func disconnected(_ id: ConnectionID) -> [HubAction] {
        guard let connection = connections[id] else { return [] }
        var actions: [HubAction] = []
        for channel in connection.channels.sorted() {
            actions += leave(id, channel: channel)
        }
        connections[id] = nil
        socketIndex[connection.socketID] = nil
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
