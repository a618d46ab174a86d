import PusherProtocol

/// Channel membership: subscriptions (public, private, presence, cache) and client events.
extension AppHub {
    // MARK: subscriptions

    mutating func refuse(_ id: ConnectionID, _ message: String, code: Int?) -> [HubAction] {
        counters.refusedSubscriptions += 1
        return [.send(id, ServerFrame.error(message, code: code))]
    }

    mutating func subscribe(_ id: ConnectionID, data: JSONValue, now: ContinuousClock.Instant) -> [HubAction] {
        // Not the whole Connection: a copy of it would share its channel set, and the insert below
        // would then copy that set — every subscription O(channels on the connection), which made
        // one connection taking 100,000 channels quadratic (Benchmarks/fleet/bench_fleet.py).
        guard let socketID = connections[id]?.socketID else { return [] }
        guard let channel = data["channel"]?.stringValue else {
            return refuse(id, "pusher:subscribe needs data.channel", code: nil)
        }
        if let owner = UserID.ofServerToUserChannel(channel) {
            return subscribeServerToUser(id, channel: channel, owner: owner)
        }
        if let problem = ChannelName.problem(with: channel) {
            return refuse(id, "Invalid channel name '\(channel)': \(problem)", code: nil)
        }
        if connections[id]?.channels.contains(channel) == true {
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
            // docs/pusher-protocol.md §2 "Auth strings": KEY:hex(HMAC(secret, socket_id:channel[:channel_data])).
            // Refusals carry code null as hosted Pusher sends them: a 4000–4099 code would make
            // clients such as pysher drop the whole connection over one channel.
            guard
                PusherAuth.verifyChannelAuth(
                    auth, key: app.key, secret: app.secret, socketID: socketID, channel: channel, channelData: channelData)
            else {
                return refuse(
                    id,
                    "Invalid signature: Expected HMAC SHA256 hex digest of \(PusherAuth.channelStringToSign(socketID: socketID, channel: channel, channelData: channelData)), but got \(auth)",
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
            actions.append(.webhook(PusherWebhookEvent(name: "channel_occupied", channel: channel)))
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
                // One member_added per user, however many connections it has (docs/pusher-protocol.md §1, "Presence").
                record.members[presenceUser.id] = Member(info: presenceUser.info, connections: 1)
                record.memberOrder.append(presenceUser.id)
                let added = "{\"user_id\":" + jsonQuoted(presenceUser.id) + ",\"user_info\":" + presenceUser.info.encoded + "}"
                if !others.isEmpty {
                    actions.append(
                        .deliver(
                            ServerFrame.channelEvent(event: "pusher_internal:member_added", channel: channel, data: added),
                            to: others.sorted()))
                }
                actions.append(.webhook(PusherWebhookEvent(name: "member_added", channel: channel, userID: presenceUser.id)))
            }
            succeeded = Self.presenceData(record)
        }
        channels[channel] = record
        actions.append(
            .send(id, ServerFrame.channelEvent(event: "pusher_internal:subscription_succeeded", channel: channel, data: succeeded)))
        actions += subscriptionCountChanged(channel, subscribers: record.subscribers)
        if ChannelName(channel).isCache {
            // Cache channels replay the last event or say pusher:cache_miss (docs/pusher-protocol.md §1).
            if let cached = cache[channel], now - cached.storedAt < cacheLifetime {
                actions.append(.send(id, cached.frame))
                counters.framesDelivered += 1
            } else {
                actions.append(.send(id, ServerFrame.cacheMiss(channel: channel)))
                actions.append(.webhook(PusherWebhookEvent(name: "cache_miss", channel: channel)))
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
                    actions.append(
                        .deliver(
                            ServerFrame.channelEvent(event: "pusher_internal:member_removed", channel: channel, data: removed),
                            to: record.subscribers.sorted()))
                }
                actions.append(.webhook(PusherWebhookEvent(name: "member_removed", channel: channel, userID: userID)))
            }
        }
        actions += subscriptionCountChanged(channel, subscribers: record.subscribers)
        if record.subscribers.isEmpty {
            channels[channel] = nil
            // `#server-to-user-` channels are the user protocol's own: no webhooks.
            if UserID.ofServerToUserChannel(channel) == nil {
                actions.append(.webhook(PusherWebhookEvent(name: "channel_vacated", channel: channel)))
            }
        } else {
            channels[channel] = record
        }
        return actions
    }

    /// With ``subscriptionCountEvents`` on, a non-presence channel's new connection count goes to
    /// every subscriber as `pusher_internal:subscription_count` `{"subscription_count":N}` and out
    /// as a `subscription_count` webhook (also with 0, just before `channel_vacated`).
    func subscriptionCountChanged(_ channel: String, subscribers: Set<ConnectionID>) -> [HubAction] {
        guard subscriptionCountEvents, ChannelName(channel).kind != .presence, UserID.ofServerToUserChannel(channel) == nil else {
            return []
        }
        var actions: [HubAction] = []
        if !subscribers.isEmpty {
            let data = "{\"subscription_count\":" + String(subscribers.count) + "}"
            actions.append(
                .deliver(
                    ServerFrame.channelEvent(event: "pusher_internal:subscription_count", channel: channel, data: data),
                    to: subscribers.sorted()))
        }
        actions.append(.webhook(PusherWebhookEvent(name: "subscription_count", channel: channel, subscriptionCount: subscribers.count)))
        return actions
    }

    // MARK: client events

    mutating func refuseClientEvent(_ id: ConnectionID, _ message: String, code: Int?) -> [HubAction] {
        counters.refusedClientEvents += 1
        return [.send(id, ServerFrame.error(message, code: code))]
    }

    /// A `client-*` event: private/presence only, after subscription, ≤ 10 per second, never
    /// echoed to the sender, `user_id` added on presence (docs/pusher-protocol.md §1, "Client events").
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
                return refuseClientEvent(
                    id, "Client event rejected due to rate limit", code: Int(PusherCloseCode.clientEventRejected.rawValue))
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
        actions.append(
            .webhook(
                PusherWebhookEvent(
                    name: "client_event", channel: channel, userID: userID, event: event, data: data, socketID: connection.socketID)))
        return actions
    }
}
