import PusherProtocol

/// Signing in as a user: the machine's side of ``UserSession``.
extension PusherConnectionStateMachine {
    /// The user the current connection is signed in as.
    public var signedInUser: PusherUser? { userSession.user }

    /// Whether sign-in was asked for (it is then repeated on every connection).
    public var signInRequested: Bool { userSession.phase != .off }

    /// The application asked to sign in: now if connected, and on every connection from now on.
    public mutating func signInRequested(now: ContinuousClock.Instant) -> [Action] {
        userSession.signInRequested(socketID: socketID)
    }

    /// An ``Action/authenticateUser(socketID:)`` produced `auth`.
    public mutating func userAuthenticationSucceeded(socketID: String, auth: PusherUserAuth, now: ContinuousClock.Instant) -> [Action] {
        guard self.socketID == socketID else { return [] }
        return userSession.authenticationSucceeded(socketID: socketID, auth: auth, now: now)
    }

    /// An ``Action/authenticateUser(socketID:)`` failed.
    public mutating func userAuthenticationFailed(socketID: String, message: String, now: ContinuousClock.Instant) -> [Action] {
        guard self.socketID == socketID else { return [] }
        return userSession.authenticationFailed(socketID: socketID, message: message, now: now)
    }
}
