import PusherProtocol

/// Pusher's user-level protocol (docs/pusher-protocol.md §1, "User sign-in"): `pusher:signin`,
/// the `#server-to-user-<id>` channel, watchlist online/offline events, terminating a user's
/// connections and the sign-in timeout.
extension AppHub {
    /// Largest `user_data` accepted in `pusher:signin`, in bytes: pusher-local's choice (hosted
    /// Pusher documents none), the same 10 KB as event data.
    public static let maxUserDataBytes = PusherLimits.eventDataBytes

    /// What a valid `user_data` says.
    struct UserData {
        var id: String
        /// Distinct user ids, in the order given (not yet cut to ``PusherLimits/watchlistIDs``).
        var watchlist: [String]
    }

    // MARK: sign-in

    mutating func refuseSignin(_ id: ConnectionID, _ message: String) -> [HubAction] {
        counters.refusedSignins += 1
        return [.send(id, ServerFrame.error(message, code: nil))]
    }

    /// `pusher:signin` with `auth` = KEY:HMAC(secret, `socket_id::user::user_data`) and
    /// `user_data` (a JSON object: string `id`, optional `user_info`, optional `watchlist`).
    /// Answered with `pusher:signin_success`; the connection then counts as one of the user's
    /// and may subscribe to `#server-to-user-<id>`. Signing in again as the same user replaces
    /// the watchlist; as another user it is refused (a connection is one user's until it closes).
    mutating func signin(_ id: ConnectionID, data: JSONValue) -> [HubAction] {
        guard let connection = connections[id] else { return [] }
        guard let auth = data["auth"]?.stringValue, let userData = data["user_data"]?.stringValue else {
            return refuseSignin(id, "pusher:signin needs data.auth and data.user_data strings")
        }
        if userData.utf8.count > Self.maxUserDataBytes {
            return refuseSignin(id, "user_data is \(userData.utf8.count) bytes; at most \(Self.maxUserDataBytes)")
        }
        let expected = PusherAuth.userAuth(key: app.key, secret: app.secret, socketID: connection.socketID, userData: userData)
        guard constantTimeEqual(auth, expected) else {
            return refuseSignin(
                id,
                "Invalid signature for pusher:signin: expected KEY:HMAC-SHA256 hex digest of '\(connection.socketID)::user::' + user_data")
        }
        let user: UserData
        switch Self.userData(userData) {
        case .failure(let problem): return refuseSignin(id, problem.message)
        case .success(let parsed): user = parsed
        }
        if let current = connection.userID, current != user.id {
            return refuseSignin(id, "This connection is signed in as \(current); it cannot sign in as \(user.id)")
        }
        counters.signins += 1
        let success = "{\"user_data\":" + jsonQuoted(userData) + "}"
        var actions: [HubAction] = [.send(id, "{\"event\":\"pusher:signin_success\",\"data\":" + jsonQuoted(success) + "}")]
        var watchlist = user.watchlist
        if watchlistEvents, watchlist.count > PusherLimits.watchlistIDs {
            counters.watchlistsTruncated += 1
            actions.append(
                .send(
                    id,
                    ServerFrame.error(
                        "Watchlist limit exceeded: \(watchlist.count) user ids, at most \(PusherLimits.watchlistIDs); the first \(PusherLimits.watchlistIDs) are kept",
                        code: Int(PusherCloseCode.watchlistLimitExceeded.rawValue))))
            watchlist = Array(watchlist.prefix(PusherLimits.watchlistIDs))
        }
        unwatch(id)
        if connection.userID == nil {
            connections[id]?.userID = user.id
            let cameOnline = users[user.id] == nil
            users[user.id, default: []].insert(id)
            if cameOnline { actions += watchlistEvent("online", user.id, to: watchers[user.id] ?? []) }
        }
        guard watchlistEvents else { return actions }
        connections[id]?.watchlist = watchlist
        for watched in watchlist { watchers[watched, default: []].insert(id) }
        // The watcher's initial state: who on its list is online now.
        let online = watchlist.filter { users[$0] != nil }
        if !online.isEmpty {
            counters.watchlistEvents += 1
            actions.append(.send(id, ServerFrame.watchlistEvents(name: "online", userIDs: online)))
        }
        return actions
    }

    /// Parses `user_data`: a JSON object with a valid string `id` (``UserID/problem(with:)``) and,
    /// optionally, `watchlist`, an array of valid user id strings (duplicates dropped).
    static func userData(_ text: String) -> Result<UserData, PresenceDataError> {
        guard let value = try? JSONValue.parse(text), case .object = value else {
            return .failure(PresenceDataError("user_data must be a JSON object"))
        }
        guard let userID = value["id"]?.stringValue else {
            return .failure(PresenceDataError("user_data must have a string 'id'"))
        }
        if let problem = UserID.problem(with: userID) { return .failure(PresenceDataError("user_data.id is invalid: \(problem)")) }
        var watchlist: [String] = []
        switch value["watchlist"] {
        case nil, .null?:
            break
        case .array(let items)?:
            var seen: Set<String> = []
            for item in items {
                guard let watched = item.stringValue else {
                    return .failure(PresenceDataError("user_data.watchlist must be an array of user id strings"))
                }
                if let problem = UserID.problem(with: watched) {
                    return .failure(PresenceDataError("user_data.watchlist holds an invalid id: \(problem)"))
                }
                if seen.insert(watched).inserted { watchlist.append(watched) }
            }
        default:
            return .failure(PresenceDataError("user_data.watchlist must be an array of user id strings"))
        }
        return .success(UserData(id: userID, watchlist: watchlist))
    }

    /// `pusher_internal:watchlist_events` `{"events":[{"name":NAME,"user_ids":[USER]}]}` to
    /// `recipients` (nothing when watchlist events are off or nobody watches).
    mutating func watchlistEvent(_ name: String, _ userID: String, to recipients: Set<ConnectionID>) -> [HubAction] {
        guard watchlistEvents, !recipients.isEmpty else { return [] }
        counters.watchlistEvents += recipients.count
        return [.deliver(ServerFrame.watchlistEvents(name: name, userIDs: [userID]), to: recipients.sorted())]
    }

    /// Forgets what connection `id` watches.
    mutating func unwatch(_ id: ConnectionID) {
        guard let watchlist = connections[id]?.watchlist else { return }
        for watched in watchlist {
            watchers[watched]?.remove(id)
            if watchers[watched]?.isEmpty == true { watchers[watched] = nil }
        }
        connections[id]?.watchlist = []
    }

    /// Connection `id` is going away: it stops watching, and its user goes offline when this was
    /// the user's last signed-in connection.
    mutating func signedOut(_ id: ConnectionID) -> [HubAction] {
        unwatch(id)
        guard let userID = connections[id]?.userID else { return [] }
        connections[id]?.userID = nil
        users[userID]?.remove(id)
        guard users[userID]?.isEmpty == true else { return [] }
        users[userID] = nil
        return watchlistEvent("offline", userID, to: watchers[userID] ?? [])
    }

    // MARK: #server-to-user-<id>

    /// `pusher:subscribe` to `#server-to-user-<owner>`: only a connection signed in as `owner`
    /// may (no auth string). No webhooks and no subscription counts for these channels.
    mutating func subscribeServerToUser(_ id: ConnectionID, channel: String, owner: String) -> [HubAction] {
        guard let connection = connections[id] else { return [] }
        guard let userID = connection.userID else {
            return refuse(id, "Subscription to \(channel) needs a signed-in connection (pusher:signin first)", code: nil)
        }
        guard userID == owner else {
            return refuse(id, "Subscription to \(channel) refused: this connection is signed in as \(userID)", code: nil)
        }
        if connection.channels.contains(channel) {
            return refuse(id, "Existing subscription to channel \(channel)", code: nil)
        }
        channels[channel, default: Channel()].subscribers.insert(id)
        connections[id]?.channels.insert(channel)
        return [.send(id, ServerFrame.channelEvent(event: "pusher_internal:subscription_succeeded", channel: channel, data: "{}"))]
    }

    // MARK: server side

    /// `POST /apps/ID/users/USER/terminate_connections`: closes every signed-in connection of
    /// `userID` with 4009; other connections are untouched. The user goes offline (watchlists)
    /// as its connections report their end.
    public mutating func terminateUserConnections(_ userID: String) -> [HubAction] {
        let ids = (users[userID] ?? []).sorted()
        counters.connectionsTerminated += ids.count
        return ids.map { .close($0, code: PusherCloseCode.connectionIsUnauthorized.rawValue, reason: "User connections terminated") }
    }

    /// The sign-in timeout (``signinTimeout``) of connection `id` has passed: closed with 4009
    /// unless it has signed in (or is gone).
    public mutating func signinDeadlineReached(_ id: ConnectionID) -> [HubAction] {
        guard let connection = connections[id], connection.userID == nil else { return [] }
        counters.signinTimeouts += 1
        return [.close(id, code: PusherCloseCode.connectionIsUnauthorized.rawValue, reason: "Not signed in within the sign-in timeout")]
    }

    /// Number of users with at least one signed-in connection.
    public var onlineUserCount: Int { users.count }

    /// Number of connections signed in as `userID`.
    public func signedInConnectionCount(_ userID: String) -> Int { users[userID]?.count ?? 0 }
}
