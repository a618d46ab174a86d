import PusherProtocol

/// The HTTP API's side of the hub: validating and publishing events, and the channel queries.
extension AppHub {
    // MARK: HTTP API

    /// Checks one event of `POST /events` or `/batch_events` against Pusher's rules and limits.
    public static func validate(_ request: PublishRequest) -> APIError? {
        if let problem = EventName.problem(with: request.name) { return .badRequest("Invalid event name: \(problem)") }
        if request.channels.isEmpty { return .badRequest("No channels given") }
        if request.channels.count > PusherLimits.channelsPerTrigger {
            return .badRequest("Too many channels: \(request.channels.count) (at most \(PusherLimits.channelsPerTrigger))")
        }
        for channel in request.channels {
            // `#server-to-user-<id>` (sendToUser): the id follows the user id rules, not the channel name's.
            if let userID = UserID.ofServerToUserChannel(channel) {
                if let problem = UserID.problem(with: userID) { return .badRequest("Invalid channel name '\(channel)': \(problem)") }
            } else if let problem = ChannelName.problem(with: channel) {
                return .badRequest("Invalid channel name '\(channel)': \(problem)")
            }
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
    /// (the bridge's tool against echo loops, docs/pusher-protocol.md §2). One frame per channel.
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

    /// Occupied channels (at least one subscriber), sorted, optionally filtered by prefix; users'
    /// `#server-to-user-` channels are not listed.
    public func occupiedChannels(prefix: String?) -> [String] {
        channels.keys.filter { name in
            UserID.ofServerToUserChannel(name) == nil && (prefix.map { name.hasUTF8Prefix($0) } ?? true)
        }.sorted()
    }

    /// Subscriptions per channel, for the control endpoint's counters.
    public var subscriptionsPerChannel: [String: Int] { channels.mapValues { $0.subscribers.count } }

    /// Whether a cache channel holds an unexpired event.
    public func hasCachedEvent(_ channel: String, now: ContinuousClock.Instant) -> Bool {
        guard let cached = cache[channel] else { return false }
        return now - cached.storedAt < cacheLifetime
    }
}
