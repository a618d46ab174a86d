import PusherProtocol

/// The JSON inside the `data` of the protocol's own events, read with ``JSONScanner``: what the
/// server says on connect, on errors and about presence members. Pure functions of the text.
enum ProtocolEventData {
    /// `socket_id` and `activity_timeout` of `pusher:connection_established`.
    struct ConnectionEstablished: Sendable, Equatable {
        /// The new connection's socket id (checked with ``SocketID/isValid(_:)``).
        var socketID: String
        /// The server's activity timeout in seconds, when it sent a number (any number: the
        /// caller decides which ones it accepts).
        var activityTimeoutSeconds: Double?
    }

    /// The handshake data, or `nil` when it has no valid `socket_id`.
    static func connectionEstablished(from data: String?) -> ConnectionEstablished? {
        guard let data, let members = try? JSONScanner.object(data),
            case .string(let socketID)? = members["socket_id"], SocketID.isValid(socketID)
        else { return nil }
        var seconds: Double?
        if case .raw(let text)? = members["activity_timeout"] { seconds = Double(text) }
        return ConnectionEstablished(socketID: socketID, activityTimeoutSeconds: seconds)
    }

    /// `pusher:error` data, in object or string form, `code` number/string/null.
    static func serverError(from data: String?) -> PusherError {
        guard let data else { return .serverError(message: "pusher:error without data", code: nil) }
        guard let members = try? JSONScanner.object(data) else {
            return .serverError(message: data, code: nil)
        }
        let message = members["message"]?.text ?? data
        let code = members["code"]?.stringOrNumber.flatMap { Int($0) }
        return .serverError(message: message, code: code)
    }

    /// `pusher:subscription_error` data: `error` or `message`, `status` or `code`.
    static func subscriptionError(channel: String, data: String?) -> PusherError {
        guard let data, let members = try? JSONScanner.object(data) else {
            return .subscriptionFailed(channel: channel, message: data ?? "subscription_error")
        }
        let message = members["error"]?.text ?? members["message"]?.text ?? data
        let code = members["status"]?.stringOrNumber.flatMap { Int($0) } ?? members["code"]?.stringOrNumber.flatMap { Int($0) }
        return .subscriptionFailed(channel: channel, message: message, code: code)
    }

    /// The member list of `{"presence":{"ids":[..],"hash":{id:info},"count":N}}`.
    static func presenceMembers(from data: String?) -> Result<[PusherMember], PresenceDataError> {
        guard let data, let top = try? JSONScanner.object(data), case .raw(let presence)? = top["presence"],
            let presenceMembers = try? JSONScanner.object(presence)
        else { return .failure(PresenceDataError(reason: "presence data missing or malformed")) }
        var infos: [String: String?] = [:]
        var order: [String] = []
        if case .raw(let hash)? = presenceMembers["hash"], let entries = try? JSONScanner.objectMembers(of: hash) {
            for (id, info) in entries {
                if infos[id] == nil { order.append(id) }
                infos[id] = .some(
                    info.text.map { text in
                        if case .string = info { return JSONText.quoted(text) }
                        return text
                    })
            }
        }
        if case .raw(let ids)? = presenceMembers["ids"], let elements = try? JSONScanner.arrayElements(of: ids) {
            let idList = elements.compactMap(\.stringOrNumber)
            // `ids` gives the order; ids missing from `hash` have no info.
            let known = Set(idList)
            order = idList + order.filter { !known.contains($0) }
        }
        var seen = Set<String>()
        var members: [PusherMember] = []
        for id in order where seen.insert(id).inserted {
            members.append(PusherMember(userID: id, userInfo: infos[id] ?? nil))
        }
        return .success(members)
    }

    /// Why presence data could not be read.
    struct PresenceDataError: Error {
        /// A phrase for the ignored-frame log.
        var reason: String
    }

    /// `{"user_id":…, "user_info":…}` of member_added/member_removed.
    static func member(from data: String?) -> PusherMember? {
        guard let data, let members = try? JSONScanner.object(data),
            let id = members["user_id"]?.stringOrNumber
        else { return nil }
        let info: String? =
            switch members["user_info"] {
            case .string(let s)?: JSONText.quoted(s)
            case .raw(let raw)?: raw
            case .null?, nil: nil
            }
        return PusherMember(userID: id, userInfo: info)
    }

    /// Our own entry, from the `channel_data` we subscribed with: the member of that id in
    /// `members` if listed, otherwise as `channel_data` describes it.
    static func me(channelData: String?, members: [PusherMember]) -> PusherMember? {
        guard let own = member(from: channelData) else { return nil }
        return members.first { $0.userID == own.userID } ?? own
    }

    /// `pusher_internal:watchlist_events` data: `{"events":[{"name":"online"|"offline","user_ids":[…]}]}`.
    /// Entries of another name or shape are skipped; `nil` when the data is not that object.
    static func watchlistEvents(from data: String?) -> [PusherWatchlistEvent]? {
        guard let data, let top = try? JSONScanner.object(data), case .raw(let list)? = top["events"],
            let entries = try? JSONScanner.arrayElements(of: list)
        else { return nil }
        var events: [PusherWatchlistEvent] = []
        for case .raw(let entry) in entries {
            guard let members = try? JSONScanner.object(entry), case .string(let name)? = members["name"],
                let kind = PusherWatchlistEvent.Kind(rawValue: name), case .raw(let ids)? = members["user_ids"],
                let elements = try? JSONScanner.arrayElements(of: ids)
            else { continue }
            events.append(PusherWatchlistEvent(kind: kind, userIDs: elements.compactMap(\.stringOrNumber)))
        }
        return events
    }
}
