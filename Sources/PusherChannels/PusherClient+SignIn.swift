import PusherProtocol

/// Signing in as a user (docs/pusher-protocol.md §1 "User sign-in").
extension PusherClient {
    /// Signs in with ``PusherClientOptions/userAuthentication`` now if connected, and again on
    /// every connection from now on. Results, events sent to the user and watchlist changes
    /// arrive on ``userUpdates()`` (and ``updates(bufferingPolicy:)``).
    public func signIn() {
        perform { $0.signInRequested(now: .now) }
    }

    /// The user the current connection is signed in as.
    public var user: PusherUser? { state.withLock { $0.machine.signedInUser } }

    /// Sign-in results, events sent to the signed-in user, watchlist online/offline.
    public func userUpdates() -> AsyncStream<PusherUserUpdate> {
        let (stream, continuation) = AsyncStream.makeStream(of: PusherUserUpdate.self)
        addSink(.user(continuation))
        return stream
    }

    func authenticateUser(socketID: String) async {
        do {
            let auth = try await obtainUserAuth(socketID: socketID)
            perform { $0.userAuthenticationSucceeded(socketID: socketID, auth: auth, now: .now) }
        } catch {
            perform { $0.userAuthenticationFailed(socketID: socketID, message: "\(error)", now: .now) }
        }
    }

    private func obtainUserAuth(socketID: String) async throws -> PusherUserAuth {
        switch options.userAuthentication {
        case .none:
            throw PusherError.signInFailed("no user authentication configured")
        case .inline(let signer, let userData):
            return signer.signIn(socketID: socketID, userData: userData)
        case .authenticator(let authenticate):
            return try await authenticate(socketID)
        case .endpoint(let url, let headers, let params):
            var body = "socket_id=" + PusherAuthRequest.formEncode(socketID)
            for (name, value) in params.sorted(by: { $0.key < $1.key }) {
                body += "&" + PusherAuthRequest.formEncode(name) + "=" + PusherAuthRequest.formEncode(value)
            }
            var request = PusherAuthEndpointRequest(url: url, body: body)
            request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
            for (name, value) in headers { request.headers.add(name: name, value: value) }
            return try PusherUserAuth(json: try await fetchAuthReply(request) { .signInFailed($0) })
        }
    }
}
