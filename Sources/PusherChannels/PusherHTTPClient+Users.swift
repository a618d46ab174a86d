import PusherProtocol

/// The user-level calls of the HTTP API (docs/pusher-protocol.md §1, "User sign-in", and §2,
/// "Endpoints"): sending to one user, terminating a user's connections, and signing a
/// `pusher:signin` for a client (what a backend's user authentication endpoint answers).
extension PusherHTTPClient {
    /// `POST /apps/ID/events` on `#server-to-user-<userID>`: the event reaches every connection
    /// signed in as `userID` that subscribed to its server-to-user channel (pusher-js and
    /// PusherChannels subscribe after `pusher:signin_success`).
    ///
    /// Throws ``PusherHTTPError/invalidRequest(_:)`` before sending when `userID` is not a valid
    /// user id (`UserID.problem(with:)`: 1–200 characters of `A-Z a-z 0-9 _ - = @ , . ;`), the
    /// event name is invalid or `data` is over ``maxEventBytes``.
    public func sendToUser(_ userID: String, event: String, data: String) async throws(PusherHTTPError) {
        if let problem = UserID.problem(with: userID) { throw .invalidRequest(problem) }
        if let problem = EventName.problem(with: event) { throw .invalidRequest(problem) }
        if data.utf8.count > maxEventBytes {
            throw .invalidRequest("event data is \(data.utf8.count) bytes; the limit is \(maxEventBytes)")
        }
        // Not through `trigger`: `#` is outside the channel-name alphabet, on purpose (only the
        // server-to-user prefix may carry it), so `trigger` would refuse the name.
        let body = JSONText.object([
            ("name", JSONText.quoted(event)),
            ("data", JSONText.quoted(data)),
            ("channels", "[" + JSONText.quoted(UserID.serverToUserChannel(userID)) + "]"),
        ])
        _ = try await send(method: .POST, path: "/apps/\(appID)/events", body: Array(body.utf8))
    }

    /// `POST /apps/ID/users/USER/terminate_connections` (body `{}`): the server closes every
    /// connection signed in as `userID` with 4009; the user's other sessions are not affected.
    ///
    /// Throws ``PusherHTTPError/invalidRequest(_:)`` before sending when `userID` is not a valid
    /// user id.
    public func terminateUserConnections(_ userID: String) async throws(PusherHTTPError) {
        if let problem = UserID.problem(with: userID) { throw .invalidRequest(problem) }
        _ = try await send(method: .POST, path: "/apps/\(appID)/users/\(userID)/terminate_connections", body: Array("{}".utf8))
    }

    /// The reply of a user authentication endpoint for `pusher:signin`: the JSON object
    /// `{"auth":"KEY:HMAC","user_data":USER_DATA}`, where the HMAC-SHA256 (with the app secret)
    /// covers `socket_id::user::user_data` (docs/pusher-protocol.md §2, "Auth strings"). Nothing is
    /// sent; the secret stays in this process.
    ///
    /// - Parameters:
    ///   - socketID: the connection's socket id (`123.456`).
    ///   - userData: the JSON object text the client will send, byte for byte: a string `id`
    ///     (`UserID.problem(with:)`), optional `user_info`, optional `watchlist` (user ids).
    /// - Throws: ``PusherHTTPError/invalidRequest(_:)`` for a malformed socket id or `user_data`.
    public func authenticateUser(socketID: String, userData: String) throws(PusherHTTPError) -> String {
        guard SocketID.isValid(socketID) else { throw .invalidRequest("socket_id '\(socketID)' is not of the form 123.456") }
        let members: [String: JSONScanner.Value]
        do {
            members = try JSONScanner.object(userData)
        } catch {
            throw .invalidRequest("user_data must be a JSON object: \(error)")
        }
        guard case .string(let id)? = members["id"] else { throw .invalidRequest("user_data must have a string 'id'") }
        if let problem = UserID.problem(with: id) { throw .invalidRequest("user_data.id is invalid: \(problem)") }
        let auth = PusherAuth.userAuth(key: signature.key, secret: signature.secret, socketID: socketID, userData: userData)
        return JSONText.object([("auth", JSONText.quoted(auth)), ("user_data", JSONText.quoted(userData))])
    }

    /// ``authenticateUser(socketID:userData:)`` with `user_data` built from its parts:
    /// `{"id":userID,"user_info":userInfoJSON?,"watchlist":[…]?}` (`userInfoJSON` must be a JSON
    /// object's text; `watchlist` ids must be valid user ids).
    public func authenticateUser(
        socketID: String,
        userID: String,
        userInfoJSON: String? = nil,
        watchlist: [String]? = nil
    ) throws(PusherHTTPError) -> String {
        if let userInfoJSON {
            do {
                _ = try JSONScanner.object(userInfoJSON)
            } catch {
                throw .invalidRequest("user_info must be a JSON object: \(error)")
            }
        }
        for watched in watchlist ?? [] {
            if let problem = UserID.problem(with: watched) { throw .invalidRequest("watchlist: \(problem)") }
        }
        let userData = PusherUser.userData(id: userID, userInfo: userInfoJSON, watchlist: watchlist ?? [])
        return try authenticateUser(socketID: socketID, userData: userData)
    }
}
