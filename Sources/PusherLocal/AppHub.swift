import PusherProtocol

/// Identifies one WebSocket connection inside pusher-local (not the Pusher socket id).
public struct ConnectionID: Hashable, Sendable, Comparable, CustomStringConvertible {
    public let rawValue: UInt64
    public init(_ rawValue: UInt64) { self.rawValue = rawValue }
    public static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }
    public var description: String { "#\(rawValue)" }
}

/// A webhook event (PUSHER-PROTOCOL §2, "Webhooks"); the I/O owner batches, stamps `time_ms`,
/// signs and posts it.
public struct WebhookEvent: Sendable, Equatable {
    /// `channel_occupied`, `channel_vacated`, `member_added`, `member_removed`, `client_event`,
    /// `cache_miss`.
    public var name: String
    public var channel: String
    public var userID: String?
    public var event: String?
    public var data: String?
    public var socketID: String?

    /// The event as a JSON object, in the field names Pusher uses.
    var json: String {
        var out = "{\"name\":" + jsonQuoted(name) + ",\"channel\":" + jsonQuoted(channel)
        if let userID { out += ",\"user_id\":" + jsonQuoted(userID) }
        if let event { out += ",\"event\":" + jsonQuoted(event) }
        if let data { out += ",\"data\":" + jsonQuoted(data) }
        if let socketID { out += ",\"socket_id\":" + jsonQuoted(socketID) }
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
    /// Close one connection with a WebSocket close code (PUSHER-PROTOCOL §1, "Close codes").
    case close(ConnectionID, code: UInt16, reason: String)
    /// Post a webhook event.
    case webhook(WebhookEvent)
}

/// An HTTP API failure: status and a plain-text body (PUSHER-PROTOCOL §2, "Statuses").
public struct APIError: Error, Sendable, Equatable {
    public var status: Int
    public var message: String
    public init(status: Int, message: String) {
        self.status = status
        self.message = message
    }
    static func badRequest(_ message: String) -> APIError { APIError(status: 400, message: message) }
    static func tooLarge(_ message: String) -> APIError { APIError(status: 413, message: message) }
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
/// cache channels, client events and HTTP publishes (PUSHER-PROTOCOL §1–2).
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

    struct Connection {
        var socketID: String
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
    /// The app's counters.
    public private(set) var counters = AppCounters()

    public init(app: PusherLocalApp, activityTimeoutSeconds: Int) {
        self.app = app
        self.activityTimeoutSeconds = activityTimeoutSeconds
    }

    // MARK: connections

    /// Number of open connections.
    public var connectionCount: Int { connections.count }

    /// Whether `socketID` is in use by an open connection.
    public func isSocketIDInUse(_ socketID: String) -> Bool { socketIndex[socketID] != nil }

    /// A connection was accepted and given `socketID`: greet it (PUSHER-PROTOCOL §1, "Handshake").
    public mutating func connected(_ id: ConnectionID, socketID: String) -> [HubAction] {
        connections[id] = Connection(socketID: socketID)
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
    public mutating func received(_ text: String, from id: ConnectionID, now: ContinuousClock.Instant, answerPings: Bool = true) -> [HubAction] {
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

    // MARK: user sign-in

    /// `pusher:signin` with `auth` = KEY:HMAC(secret, `socket_id::user::user_data`) and
    /// `user_data` (a JSON object with a string `id`); answered with `pusher:signin_success`
    /// (PUSHER-PROTOCOL §1, "User sign-in"). No `#server-to-user-` channel is kept.
    mutating func signin(_ id: ConnectionID, data: JSONValue) -> [HubAction] {
        guard let connection = connections[id] else { return [] }
        guard let auth = data["auth"]?.stringValue, let userData = data["user_data"]?.stringValue else {
            counters.badFrames += 1
            return [.send(id, ServerFrame.error("pusher:signin needs data.auth and data.user_data strings", code: nil))]
        }
        let expected = PusherAuth.userAuth(key: app.key, secret: app.secret, socketID: connection.socketID, userData: userData)
        guard constantTimeEqual(auth, expected) else {
            counters.badFrames += 1
            return [.send(id, ServerFrame.error("Invalid signature for pusher:signin", code: nil))]
        }
        guard let user = try? JSONValue.parse(userData), let userID = user["id"]?.stringValue, !userID.isEmpty else {
            counters.badFrames += 1
            return [.send(id, ServerFrame.error("user_data must be a JSON object with a string 'id'", code: nil))]
        }
        let success = "{\"user_data\":" + jsonQuoted(userData) + "}"
        return [.send(id, "{\"event\":\"pusher:signin_success\",\"data\":" + jsonQuoted(success) + "}")]
    }

    // MARK: subscriptions

    mutating func refuse(_ id: ConnectionID, _ message: String, code: Int?) -> [HubAction] {
        counters.refusedSubscriptions += 1
        return [.send(id, ServerFrame.error(message, code: code))]
    }

    mutating func subscribe(_ id: ConnectionID, data: JSONValue, now: ContinuousClock.Instant) -> [HubAction] {
        guard let connection = connections[id] else { return [] }
        guard let channel = data["channel"]?.stringValue else {
            return refuse(id, "pusher:subscribe needs data.channel", code: nil)
        }
        if let problem = ChannelName.problem(with: channel) {
            return refuse(id, "Invalid channel name '\(channel)': \(problem)", code: nil)
        }
        if connection.channels.contains(channel) {
            return refuse(id, "Existing subscription to channel \(channel)", code: nil)
        }
        let kind = ChannelName(channel).kind
        var presenceUser: (id: String, info: JSONValue)?
        if kind.requiresAuth {
            guard let auth = data["auth"]?.stringValue else {
                return refuse(id, "Subscription to \(channel) needs an auth string", code: nil)
            }
            var channelData: String?
            if kind == .presence {
                guard let text = data["channel_data"]?.stringValue else {
                    return refuse(id, "Subscription to \(channel) needs channel_data", code: nil)
                }
                channelData = text
            }
            // PUSHER-PROTOCOL §2 "Auth strings": KEY:hex(HMAC(secret, socket_id:channel[:channel_data])).
            // Refusals carry code null as hosted Pusher sends them: a 4000–4099 code would make
            // clients such as pysher drop the whole connection over one channel.
            guard PusherAuth.verifyChannelAuth(auth, key: app.key, secret: app.secret, socketID: connection.socketID, channel: channel, channelData: channelData) else {
                return refuse(
                    id,
                    "Invalid signature: Expected HMAC SHA256 hex digest of \(PusherAuth.channelStringToSign(socketID: connection.socketID, channel: channel, channelData: channelData)), but got \(auth)",
                    code: nil
                )
            }
            if let channelData {
                switch Self.presenceMember(channelData) {
                case .failure(let problem): return refuse(id, problem.message, code: nil)
                case .success(let member): presenceUser = member
                }
            }
        }
        var record = channels[channel] ?? Channel()
        var actions: [HubAction] = []
        if let presenceUser, record.members[presenceUser.id] == nil, record.members.count >= PusherLimits.presenceMembers {
            return refuse(id, "Presence channel \(channel) is full (\(PusherLimits.presenceMembers) members)", code: nil)
        }
        if record.subscribers.isEmpty {
            actions.append(.webhook(WebhookEvent(name: "channel_occupied", channel: channel)))
        }
        let others = Array(record.subscribers)
        record.subscribers.insert(id)
        connections[id]?.channels.insert(channel)
        var succeeded = "{}"
        if let presenceUser {
            connections[id]?.presenceUser[channel] = presenceUser.id
            if var member = record.members[presenceUser.id] {
                member.connections += 1
                record.members[presenceUser.id] = member
            } else {
                // One member_added per user, however many connections it has (PUSHER-PROTOCOL §1, "Presence").
                record.members[presenceUser.id] = Member(info: presenceUser.info, connections: 1)
                record.memberOrder.append(presenceUser.id)
                let added = "{\"user_id\":" + jsonQuoted(presenceUser.id) + ",\"user_info\":" + presenceUser.info.encoded + "}"
                if !others.isEmpty {
                    actions.append(.deliver(ServerFrame.channelEvent(event: "pusher_internal:member_added", channel: channel, data: added), to: others.sorted()))
                }
                actions.append(.webhook(WebhookEvent(name: "member_added", channel: channel, userID: presenceUser.id)))
            }
            succeeded = Self.presenceData(record)
        }
        channels[channel] = record
        actions.append(.send(id, ServerFrame.channelEvent(event: "pusher_internal:subscription_succeeded", channel: channel, data: succeeded)))
        if ChannelName(channel).isCache {
            // Cache channels replay the last event or say pusher:cache_miss (PUSHER-PROTOCOL §1).
            if let cached = cache[channel], now - cached.storedAt < cacheLifetime {
                actions.append(.send(id, cached.frame))
                counters.framesDelivered += 1
            } else {
                actions.append(.send(id, ServerFrame.cacheMiss(channel: channel)))
                actions.append(.webhook(WebhookEvent(name: "cache_miss", channel: channel)))
            }
        }
        return actions
    }

    /// The `presence` object of `subscription_succeeded`: ids, hash and count.
    static func presenceData(_ record: Channel) -> String {
        var ids = "["
        var hash = "{"
        for (i, userID) in record.memberOrder.enumerated() {
            if i > 0 {
                ids += ","
                hash += ","
            }
            ids += jsonQuoted(userID)
            hash += jsonQuoted(userID) + ":" + (record.members[userID]?.info.encoded ?? "{}")
        }
        ids += "]"
        hash += "}"
        return "{\"presence\":{\"ids\":" + ids + ",\"hash\":" + hash + ",\"count\":" + String(record.memberOrder.count) + "}}"
    }

    /// Parses presence `channel_data`: `user_id` (string or number, normalised to a string,
    /// ≤ 128 characters) and optional `user_info` (≤ 1000 bytes of JSON).
    static func presenceMember(_ channelData: String) -> Result<(id: String, info: JSONValue), PresenceDataError> {
        guard let value = try? JSONValue.parse(channelData), case .object = value else {
            return .failure(PresenceDataError("channel_data must be a JSON object"))
        }
        let userID: String
        switch value["user_id"] {
        case .string(let s)?: userID = s
        case .number(let n)?: userID = n
        default: return .failure(PresenceDataError("channel_data.user_id must be a string or a number"))
        }
        if userID.isEmpty { return .failure(PresenceDataError("channel_data.user_id is empty")) }
        if userID.utf8.count > PusherLimits.userIDLength {
            return .failure(PresenceDataError("channel_data.user_id is longer than \(PusherLimits.userIDLength) characters"))
        }
        let info = value["user_info"] ?? .object([])
        if info.encoded.utf8.count > PusherLimits.userInfoBytes {
            return .failure(PresenceDataError("channel_data.user_info is larger than \(PusherLimits.userInfoBytes) bytes"))
        }
        return .success((userID, info))
    }

    /// Why presence `channel_data` was refused.
    struct PresenceDataError: Error {
        var message: String
        init(_ message: String) { self.message = message }
    }

    mutating func leave(_ id: ConnectionID, channel: String) -> [HubAction] {
        guard var record = channels[channel] else { return [] }
        var actions: [HubAction] = []
        record.subscribers.remove(id)
        connections[id]?.channels.remove(channel)
        if let userID = connections[id]?.presenceUser.removeValue(forKey: channel), var member = record.members[userID] {
            member.connections -= 1
            if member.connections > 0 {
                record.members[userID] = member
            } else {
                record.members[userID] = nil
                record.memberOrder.removeAll { $0 == userID }
                if !record.subscribers.isEmpty {
                    let removed = "{\"user_id\":" + jsonQuoted(userID) + "}"
                    actions.append(.deliver(ServerFrame.channelEvent(event: "pusher_internal:member_removed", channel: channel, data: removed), to: record.subscribers.sorted()))
                }
                actions.append(.webhook(WebhookEvent(name: "member_removed", channel: channel, userID: userID)))
            }
        }
        if record.subscribers.isEmpty {
            channels[channel] = nil
            actions.append(.webhook(WebhookEvent(name: "channel_vacated", channel: channel)))
        } else {
            channels[channel] = record
        }
        return actions
    }

    // MARK: client events

    mutating func refuseClientEvent(_ id: ConnectionID, _ message: String, code: Int?) -> [HubAction] {
        counters.refusedClientEvents += 1
        return [.send(id, ServerFrame.error(message, code: code))]
    }

    /// A `client-*` event: private/presence only, after subscription, ≤ 10 per second, never
    /// echoed to the sender, `user_id` added on presence (PUSHER-PROTOCOL §1, "Client events").
    mutating func clientEvent(_ id: ConnectionID, event: String, message: JSONValue, now: ContinuousClock.Instant) -> [HubAction] {
        guard var connection = connections[id] else { return [] }
        guard let channel = message["channel"]?.stringValue else {
            return refuseClientEvent(id, "Client event \(event) has no channel", code: nil)
        }
        if event.utf8.count > PusherLimits.eventNameLength {
            return refuseClientEvent(id, "Event name is longer than \(PusherLimits.eventNameLength) characters", code: nil)
        }
        guard ChannelName(channel).kind.allowsClientEvents else {
            return refuseClientEvent(id, "Client events are only supported on private and presence channels, not \(channel)", code: nil)
        }
        guard connection.channels.contains(channel) else {
            return refuseClientEvent(id, "Client event rejected: not subscribed to \(channel)", code: nil)
        }
        // A fixed one-second window per connection; the 11th event in a window is refused with 4301.
        if let start = connection.clientEventWindowStart, now - start < .seconds(1) {
            if connection.clientEventsInWindow >= PusherLimits.clientEventsPerSecond {
                return refuseClientEvent(id, "Client event rejected due to rate limit", code: Int(PusherCloseCode.clientEventRejected.rawValue))
            }
            connection.clientEventsInWindow += 1
        } else {
            connection.clientEventWindowStart = now
            connection.clientEventsInWindow = 1
        }
        connections[id] = connection
        let data: String
        switch message["data"] {
        case .string(let s)?: data = s
        case let value?: data = value.encoded
        case nil: data = "{}"
        }
        if data.utf8.count > PusherLimits.eventDataBytes {
            return refuseClientEvent(id, "Client event data is larger than \(PusherLimits.eventDataBytes) bytes", code: nil)
        }
        let userID = connection.presenceUser[channel]
        let frame = ServerFrame.channelEvent(event: event, channel: channel, data: data, userID: userID)
        counters.clientEvents += 1
        var actions: [HubAction] = []
        if ChannelName(channel).isCache { cache[channel] = CachedEvent(frame: frame, storedAt: now) }
        if let record = channels[channel] {
            let recipients = record.subscribers.filter { $0 != id }
            if !recipients.isEmpty {
                counters.framesDelivered += recipients.count
                actions.append(.deliver(frame, to: recipients.sorted()))
            }
        }
        actions.append(.webhook(WebhookEvent(name: "client_event", channel: channel, userID: userID, event: event, data: data, socketID: connection.socketID)))
        return actions
    }

    // MARK: HTTP API

    /// Checks one event of `POST /events` or `/batch_events` against Pusher's rules and limits.
    public static func validate(_ request: PublishRequest) -> APIError? {
        if let problem = EventName.problem(with: request.name) { return .badRequest("Invalid event name: \(problem)") }
        if request.channels.isEmpty { return .badRequest("No channels given") }
        if request.channels.count > PusherLimits.channelsPerTrigger {
            return .badRequest("Too many channels: \(request.channels.count) (at most \(PusherLimits.channelsPerTrigger))")
        }
        for channel in request.channels {
            if let problem = ChannelName.problem(with: channel) { return .badRequest("Invalid channel name '\(channel)': \(problem)") }
        }
        if let socketID = request.socketID, !SocketID.isValid(socketID) {
            return .badRequest("Invalid socket_id '\(socketID)'")
        }
        if request.data.utf8.count > PusherLimits.eventDataBytes {
            return .tooLarge("Event data is \(request.data.utf8.count) bytes; at most \(PusherLimits.eventDataBytes)")
        }
        return nil
    }

    /// Publishes a validated event to its channels, skipping the connection of `socketID`
    /// (the bridge's tool against echo loops, PUSHER-PROTOCOL §2). One frame per channel.
    public mutating func publish(_ request: PublishRequest, now: ContinuousClock.Instant) -> [HubAction] {
        let excluded = request.socketID.flatMap { socketIndex[$0] }
        var actions: [HubAction] = []
        for channel in request.channels {
            let frame = ServerFrame.channelEvent(event: request.name, channel: channel, data: request.data)
            counters.eventsPublished += 1
            if ChannelName(channel).isCache { cache[channel] = CachedEvent(frame: frame, storedAt: now) }
            guard let record = channels[channel] else { continue }
            var recipients: [ConnectionID] = []
            recipients.reserveCapacity(record.subscribers.count)
            for subscriber in record.subscribers where subscriber != excluded { recipients.append(subscriber) }
            if recipients.isEmpty { continue }
            counters.framesDelivered += recipients.count
            actions.append(.deliver(frame, to: recipients))
        }
        return actions
    }

    /// Drops cached events older than ``cacheLifetime``.
    public mutating func expireCache(now: ContinuousClock.Instant) {
        cache = cache.filter { now - $0.value.storedAt < cacheLifetime }
    }

    /// Number of connections subscribed to `channel`.
    public func subscriptionCount(_ channel: String) -> Int { channels[channel]?.subscribers.count ?? 0 }

    /// Distinct users of a presence channel.
    public func userCount(_ channel: String) -> Int { channels[channel]?.memberOrder.count ?? 0 }

    /// User ids of a presence channel, in join order.
    public func users(_ channel: String) -> [String] { channels[channel]?.memberOrder ?? [] }

    /// Occupied channels (at least one subscriber), sorted, optionally filtered by prefix.
    public func occupiedChannels(prefix: String?) -> [String] {
        channels.keys.filter { name in prefix.map { name.hasUTF8Prefix($0) } ?? true }.sorted()
    }

    /// Subscriptions per channel, for the control endpoint's counters.
    public var subscriptionsPerChannel: [String: Int] { channels.mapValues { $0.subscribers.count } }

    /// Whether a cache channel holds an unexpired event.
    public func hasCachedEvent(_ channel: String, now: ContinuousClock.Instant) -> Bool {
        guard let cached = cache[channel] else { return false }
        return now - cached.storedAt < cacheLifetime
    }
}
