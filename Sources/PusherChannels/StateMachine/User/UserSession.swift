import PusherProtocol

/// Signing in as a user (docs/pusher-protocol.md §1 "User sign-in"): a sub-machine of
/// ``PusherConnectionStateMachine``, with no I/O and no clock.
///
/// Once ``PusherClient/signIn()`` was asked for, every connection signs in: on
/// `connection_established` the I/O owner is asked for an auth for the new socket id
/// (``PusherConnectionStateMachine/Action/authenticateUser(socketID:)``), `pusher:signin` is
/// sent with it, and after `pusher:signin_success` the connection subscribes to the user's
/// `#server-to-user-<id>` channel. A failure (authenticator, server refusal, malformed answer)
/// is reported and tried again on the same connection after a delay (1 s, doubling up to 30 s;
/// reset by a success), on the next connection, or at once when asked again.
struct UserSession: Sendable {
    typealias Action = PusherConnectionStateMachine.Action

    /// Where signing in stands on the current connection.
    enum Phase: Sendable, Equatable {
        /// Sign-in was never asked for.
        case off
        /// Asked for; waiting for a connection.
        case waiting
        /// The auth for this socket id was asked for.
        case authenticating(socketID: String)
        /// `pusher:signin` was sent; waiting for the server's answer.
        case signingIn(socketID: String)
        /// Signed in; `subscribed` once `#server-to-user-<id>` is subscribed.
        case signedIn(socketID: String, user: PusherUser, subscribed: Bool)
        /// Failed on this connection; tried again at `retryAt`.
        case failed(socketID: String, retryAt: ContinuousClock.Instant)
    }

    private(set) var phase: Phase = .off
    /// Failures since the last success: the retry delay doubles with each.
    private var failures = 0

    /// The first retry delay, doubled after each further failure up to ``maxRetryDelay``.
    static let firstRetryDelay = Duration.seconds(1)
    static let maxRetryDelay = Duration.seconds(30)

    /// When ``retryDue(now:)`` has something to do.
    var nextDeadline: ContinuousClock.Instant? {
        if case .failed(_, let retryAt) = phase { return retryAt }
        return nil
    }

    /// The signed-in user of the current connection.
    var user: PusherUser? {
        if case .signedIn(_, let user, _) = phase { return user }
        return nil
    }

    /// The channel of events to the signed-in user, once signed in.
    var serverToUserChannel: String? { user?.serverToUserChannel }

    /// Whether a `pusher:error` without a channel belongs to the sign-in in flight: it names
    /// the sign-in, or nothing else is waiting for an answer (`subscriptionPending`).
    func blames(_ error: PusherError, subscriptionPending: Bool) -> Bool {
        guard case .signingIn = phase else { return false }
        let message = error.message.lowercased()
        if message.contains("signin") || message.contains("sign-in") || message.contains("sign in") || message.contains("user_data") {
            return true
        }
        return !subscriptionPending && (error.pusherCode == nil || error.pusherCode == 4009)
    }

    // MARK: events

    /// The application asked to sign in; `socketID` is the current connection's, if connected.
    mutating func signInRequested(socketID: String?) -> [Action] {
        switch phase {
        case .off, .waiting, .failed:
            guard let socketID else {
                phase = .waiting
                return []
            }
            phase = .authenticating(socketID: socketID)
            return [.authenticateUser(socketID: socketID)]
        case .authenticating, .signingIn, .signedIn:
            return []
        }
    }

    /// A new connection: sign in on it if asked to.
    mutating func connectionEstablished(socketID: String) -> [Action] {
        guard phase != .off else { return [] }
        phase = .authenticating(socketID: socketID)
        return [.authenticateUser(socketID: socketID)]
    }

    /// The connection ended: the server forgot the sign-in.
    mutating func connectionLost() {
        if phase != .off { phase = .waiting }
    }

    /// The authenticator produced `auth` for `socketID`.
    mutating func authenticationSucceeded(socketID: String, auth: PusherUserAuth, now: ContinuousClock.Instant) -> [Action] {
        guard phase == .authenticating(socketID: socketID) else { return [] }
        // pusher-local's limit, and hosted Pusher's for event data: larger is refused anyway.
        let size = auth.userData.utf8.count
        if size > PusherLimits.eventDataBytes {
            return fail(socketID: socketID, .signInFailed("user_data is \(size) bytes; at most \(PusherLimits.eventDataBytes)"), now: now)
        }
        do {
            _ = try PusherUser(userData: auth.userData)
        } catch {
            return fail(socketID: socketID, .signInFailed("the authenticator's user_data is unusable: \(error.message)"), now: now)
        }
        phase = .signingIn(socketID: socketID)
        return [.send(ClientFrame.signIn(auth))]
    }

    /// The authenticator failed for `socketID`.
    mutating func authenticationFailed(socketID: String, message: String, now: ContinuousClock.Instant) -> [Action] {
        guard phase == .authenticating(socketID: socketID) else { return [] }
        return fail(socketID: socketID, .signInFailed("user authentication failed: \(message)"), now: now)
    }

    /// `pusher:signin_success` with `{"user_data": "<the signed JSON>"}`.
    mutating func signInSucceeded(data: String?, now: ContinuousClock.Instant) -> [Action] {
        guard case .signingIn(let socketID) = phase else {
            return [.ignoredFrame(event: "pusher:signin_success", reason: "no sign-in in flight")]
        }
        guard let data, let members = try? JSONScanner.object(data), case .string(let userData)? = members["user_data"] else {
            return fail(socketID: socketID, .signInFailed("pusher:signin_success without a user_data string"), now: now)
        }
        let user: PusherUser
        do {
            user = try PusherUser(userData: userData)
        } catch {
            return fail(socketID: socketID, .signInFailed("pusher:signin_success: \(error.message)"), now: now)
        }
        phase = .signedIn(socketID: socketID, user: user, subscribed: false)
        failures = 0
        return [
            .user(.signedIn(user)),
            .send(ClientFrame.subscribe(channel: user.serverToUserChannel, auth: nil, channelData: nil)),
        ]
    }

    /// The server refused the sign-in (a `pusher:error` that ``blames(_:subscriptionPending:)``).
    mutating func signInRefused(_ error: PusherError, now: ContinuousClock.Instant) -> [Action] {
        guard case .signingIn(let socketID) = phase else { return [.error(error)] }
        return fail(socketID: socketID, .signInFailed("server refused the sign-in: \(error.message)", code: error.pusherCode), now: now)
    }

    /// A frame on the user's `#server-to-user-<id>` channel.
    mutating func serverToUserFrame(_ frame: PusherFrame) -> [Action] {
        guard case .signedIn(let socketID, let user, _) = phase else { return [] }
        switch frame.event {
        case "pusher_internal:subscription_succeeded":
            phase = .signedIn(socketID: socketID, user: user, subscribed: true)
            return [.subscriptionSucceeded(channel: user.serverToUserChannel)]
        case "pusher:subscription_error":
            let error = ProtocolEventData.subscriptionError(channel: user.serverToUserChannel, data: frame.data)
            return [.subscriptionFailed(channel: user.serverToUserChannel, error: error)]
        default:
            if EventName.isProtocolEvent(frame.event) {
                return [.ignoredFrame(event: frame.event, reason: "protocol event on the user's channel")]
            }
            return [.user(.event(PusherEvent(name: frame.event, channel: frame.channel, data: frame.data, userID: frame.userID)))]
        }
    }

    /// `pusher_internal:watchlist_events` with `{"events":[{"name","user_ids"}]}`.
    func watchlistEvents(data: String?) -> [Action] {
        guard user != nil else {
            return [.ignoredFrame(event: "pusher_internal:watchlist_events", reason: "not signed in")]
        }
        guard let events = ProtocolEventData.watchlistEvents(from: data) else {
            return [.ignoredFrame(event: "pusher_internal:watchlist_events", reason: "malformed watchlist data")]
        }
        return events.map { .user(.watchlist($0)) }
    }

    /// The retry of a failed sign-in is due: authenticate again on the same connection.
    mutating func retryDue(now: ContinuousClock.Instant) -> [Action] {
        guard case .failed(let socketID, let retryAt) = phase, retryAt <= now else { return [] }
        phase = .authenticating(socketID: socketID)
        return [.authenticateUser(socketID: socketID)]
    }

    private mutating func fail(socketID: String, _ error: PusherError, now: ContinuousClock.Instant) -> [Action] {
        failures += 1
        var delay = Self.firstRetryDelay
        for _ in 1..<failures where delay < Self.maxRetryDelay { delay *= 2 }
        phase = .failed(socketID: socketID, retryAt: now + min(delay, Self.maxRetryDelay))
        return [.user(.signInFailed(error))]
    }
}
