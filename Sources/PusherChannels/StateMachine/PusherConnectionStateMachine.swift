import Backoff
import PusherProtocol

/// The Pusher protocol's decisions, with no I/O, no clock reads, no logging and no tasks.
///
/// Events are methods named for what happened (`connectRequested`, `receivedFrame`,
/// `transportClosed`, `tick`, …) and take the current time; each returns the actions the I/O
/// owner (``PusherClient``) must carry out, in order. Tests drive it with a manual clock
/// (`t0 + .seconds(n)`), never sleeping.
///
/// It composes one sub-machine per concern, each in a file of its own and tested on its own:
/// `ConnectionLifecycle` (phases, handshake timeout, keep-alive in `ConnectedState`,
/// reconnects by close code in `ReconnectSchedule`), `SubscriptionTable` (the channels, in
/// order, with their `PresenceRoster` and `EncryptedChannelKey`), `ClientEventRateLimiter`,
/// and `ProtocolEventData` (the JSON of the protocol's own events). This type routes events
/// between them and keeps the public API.
///
/// What it decides (docs/pusher-protocol.md §1, docs/contract.md §5.5):
/// - handshake: wait for `pusher:connection_established` (at most `handshakeTimeout`);
/// - keep-alive: after `min(activityTimeout, server's activity_timeout)` of silence send
///   `pusher:ping`; no frame within `pongTimeout` → drop and reconnect; answer server pings;
/// - reconnect by close code: 4000–4099 refused (error; retry only at the backoff cap, or stop),
///   4100–4199 backoff (≥ 1 s), 4200–4299 at once within a random 0–500 ms (then backoff if it
///   keeps failing), others backoff; exponential delays with jitter and a cap from `ReconnectPolicy`; the attempt
///   counter starts over after a connection stayed up `stableAfter`;
/// - subscriptions: may be requested at any time; (re)sent after every connect with fresh auth
///   for the new `socket_id`; presence member lists replaced (never appended) on every
///   `subscription_succeeded`; encrypted channels decrypted, with one key refetch on failure.
public struct PusherConnectionStateMachine: Sendable {
    /// The settings the machine needs, taken from ``PusherClientOptions``.
    public struct Configuration: Sendable {
        /// Our activity timeout; the effective one is min(this, the server's).
        public var activityTimeout: Duration
        /// How long to wait for any frame after sending `pusher:ping`.
        public var pongTimeout: Duration
        /// How long to wait for `pusher:connection_established` after opening.
        public var handshakeTimeout: Duration
        /// Whether to reconnect at all after losing the connection.
        public var autoReconnect: Bool
        /// Backoff, cap, attempt limit and stability window.
        public var reconnectPolicy: ReconnectPolicy
        /// After a 4000–4099 close: retry at the cap (`true`) or stop (`false`).
        public var retryAfterRefusal: Bool

        /// A configuration from its parts.
        public init(
            activityTimeout: Duration = .seconds(120),
            pongTimeout: Duration = .seconds(30),
            handshakeTimeout: Duration = .seconds(30),
            autoReconnect: Bool = true,
            reconnectPolicy: ReconnectPolicy = .default,
            retryAfterRefusal: Bool = true
        ) {
            self.activityTimeout = activityTimeout
            self.pongTimeout = pongTimeout
            self.handshakeTimeout = handshakeTimeout
            self.autoReconnect = autoReconnect
            self.reconnectPolicy = reconnectPolicy
            self.retryAfterRefusal = retryAfterRefusal
        }

        /// The machine's part of the client options.
        public init(options: PusherClientOptions) {
            self.init(
                activityTimeout: options.activityTimeout,
                pongTimeout: options.pongTimeout,
                handshakeTimeout: options.handshakeTimeout,
                autoReconnect: options.autoReconnect,
                reconnectPolicy: options.reconnectPolicy,
                retryAfterRefusal: options.retryAfterRefusal
            )
        }
    }

    /// A command for the I/O owner. It carries them out in order and decides nothing itself.
    public enum Action: Sendable, Hashable {
        /// Open a new WebSocket to the server's URL.
        case openTransport
        /// Close the current WebSocket (our own decision: disconnect, pong or handshake timeout).
        case closeTransport
        /// Send this text frame on the current WebSocket.
        case send(String)
        /// Obtain an auth for `channel` on connection `socketID`, then report it back with
        /// ``authorizationSucceeded(channel:socketID:auth:now:)`` or ``authorizationFailed(channel:socketID:message:)``.
        case authorize(channel: String, socketID: String)
        /// The connection state changed; tell the application.
        case connectionStateChanged(PusherConnectionStateChange)
        /// A reconnect attempt is due after `after` (attempt counts from 1 since the last stable
        /// connection); for logs and metrics — the deadline is in ``nextDeadline``.
        case reconnectScheduled(after: Duration, attempt: Int)
        /// Hand this event to the application.
        case deliver(PusherEvent)
        /// A subscription succeeded.
        case subscriptionSucceeded(channel: String)
        /// A presence member list changed.
        case presence(PusherPresenceChange)
        /// A subscription failed; the channel stays known and is retried after the next connect.
        case subscriptionFailed(channel: String, error: PusherError)
        /// Report an error to the application.
        case error(PusherError)
        /// Obtain the auth for `pusher:signin` on connection `socketID`, then report it back with
        /// ``PusherConnectionStateMachine/userAuthenticationSucceeded(socketID:auth:now:)`` or
        /// ``PusherConnectionStateMachine/userAuthenticationFailed(socketID:message:now:)``.
        case authenticateUser(socketID: String)
        /// Something about users: signed in, sign-in failed, an event to the user, a watchlist change.
        case user(PusherUserUpdate)
        /// A frame was not used (unknown event, unknown channel, malformed data); log at debug
        /// and count it (docs/contract.md §5.2).
        case ignoredFrame(event: String, reason: String)
    }

    private var connection: ConnectionLifecycle
    private var channels = SubscriptionTable()
    var clientEvents = ClientEventRateLimiter()
    var userSession = UserSession()

    /// A machine in state `disconnected`; `jitterSeed` makes the jitter reproducible in tests.
    public init(configuration: Configuration, jitterSeed: UInt64) {
        self.connection = ConnectionLifecycle(configuration: configuration, jitterSeed: jitterSeed)
    }

    // MARK: queries

    /// The state PusherSwift users know.
    public var connectionState: PusherConnectionState { connection.connectionState }

    /// The current connection's socket id, when connected.
    public var socketID: String? { connection.socketID }

    /// The next time ``tick(now:)`` has something to do, or `nil`.
    public var nextDeadline: ContinuousClock.Instant? {
        guard let retry = userSession.nextDeadline else { return connection.nextDeadline }
        return min(retry, connection.nextDeadline ?? retry)
    }

    /// The effective activity timeout of the current connection.
    public var activityTimeout: Duration? { connection.effectiveActivityTimeout }

    /// Failed attempts since the last stable connection.
    public var failedAttempts: Int { connection.failedAttempts }

    /// The channels the application asked for, in order.
    public var channelNames: [String] { channels.names }

    /// Whether the application asked for `channel` (O(1), unlike searching ``channelNames``).
    public func hasChannel(_ channel: String) -> Bool { channels[channel] != nil }

    /// Whether `channel` is currently subscribed on the server.
    public func isSubscribed(_ channel: String) -> Bool { channels.isSubscribed(channel) }

    /// The members of presence channel `channel` (empty until subscribed).
    public func members(of channel: String) -> [PusherMember] { channels[channel]?.roster.members ?? [] }

    /// Our own member entry on presence channel `channel`.
    public func me(of channel: String) -> PusherMember? { channels[channel]?.roster.me }

    /// The last `subscription_count` announced for `channel` on the current connection, or nil.
    public func subscriptionCount(of channel: String) -> Int? { channels[channel]?.subscriptionCount }

    // MARK: connection events

    /// The application asked to connect.
    public mutating func connectRequested(now: ContinuousClock.Instant) -> [Action] {
        connection.connectRequested(now: now)
    }

    /// The application asked to disconnect. Channels are kept and resubscribed on the next connect.
    public mutating func disconnectRequested(now: ContinuousClock.Instant) -> [Action] {
        apply(connection.disconnectRequested(now: now))
    }

    /// The WebSocket ended with the server's close `code` (`nil`: no close frame).
    public mutating func transportClosed(code: UInt16?, now: ContinuousClock.Instant) -> [Action] {
        apply(connection.transportClosed(code: code, now: now))
    }

    /// The WebSocket could not be opened or failed without a close frame.
    public mutating func transportFailed(message: String, now: ContinuousClock.Instant) -> [Action] {
        apply(connection.transportFailed(message: message, now: now))
    }

    /// Time passed: send a ping, give up on a missing pong or handshake, start a due reconnect.
    public mutating func tick(now: ContinuousClock.Instant) -> [Action] {
        connection.timeElapsed(now: now) + userSession.retryDue(now: now)
    }

    /// After the server forgot our subscriptions: everything must be sent again, with new auth.
    private mutating func apply(_ outcome: ConnectionLifecycle.Outcome) -> [Action] {
        if outcome.connectionEnded {
            channels.connectionLost()
            clientEvents.connectionLost()
            userSession.connectionLost()
        }
        return outcome.actions
    }

    // MARK: frames

    /// A text frame arrived (already decoded once by ``PusherFrame/parse(_:)``).
    public mutating func receivedFrame(_ frame: PusherFrame, now: ContinuousClock.Instant) -> [Action] {
        switch connection.phase {
        case .connecting:
            return receivedDuringHandshake(frame, now: now)
        case .connected(let connected):
            // Any frame counts as activity (docs/pusher-protocol.md §1 "Keep-alive").
            connection.receivedActivity(now: now)
            return receivedWhileConnected(frame, socketID: connected.socketID, now: now)
        case .idle, .dropping, .disconnecting, .waiting:
            return [.ignoredFrame(event: frame.event, reason: "not connected")]
        }
    }

    /// A frame that could not be decoded.
    public mutating func receivedMalformedFrame(_ error: PusherFrameError, now: ContinuousClock.Instant) -> [Action] {
        connection.receivedActivity(now: now)
        return [.ignoredFrame(event: "", reason: error.message)]
    }

    private mutating func receivedDuringHandshake(_ frame: PusherFrame, now: ContinuousClock.Instant) -> [Action] {
        switch frame.event {
        case "pusher:connection_established":
            var actions = connection.connectionEstablished(ProtocolEventData.connectionEstablished(from: frame.data), now: now)
            if let socketID = connection.socketID {
                actions += channels.connectionEstablished(socketID: socketID)
                actions += userSession.connectionEstablished(socketID: socketID)
            }
            return actions
        case "pusher:error":
            return [.error(ProtocolEventData.serverError(from: frame.data))]
        default:
            return [.ignoredFrame(event: frame.event, reason: "received before connection_established")]
        }
    }

    private mutating func receivedWhileConnected(_ frame: PusherFrame, socketID: String, now: ContinuousClock.Instant) -> [Action] {
        let unknownChannel: [Action] = [.ignoredFrame(event: frame.event, reason: "unknown channel")]
        if let channel = frame.channel, channel == userSession.serverToUserChannel {
            return userSession.serverToUserFrame(frame)
        }
        switch frame.event {
        case "pusher:ping":
            return [.send(ClientFrame.pong)]
        case "pusher:pong":
            return []
        case "pusher:error":
            let error = ProtocolEventData.serverError(from: frame.data)
            if error.pusherCode == 4301 {
                return [.error(.clientEventRejected(channel: frame.channel, message: error.message, code: 4301))]
            }
            if frame.channel == nil, userSession.blames(error, subscriptionPending: channels.hasPendingSubscription) {
                return userSession.signInRefused(error, now: now)
            }
            return channels.serverError(error, channel: frame.channel)
        case "pusher:subscription_error":
            guard let channel = frame.channel else { return unknownChannel }
            return channels.subscriptionError(channel, data: frame.data) ?? unknownChannel
        case "pusher_internal:subscription_succeeded":
            guard let channel = frame.channel else { return unknownChannel }
            return channels.subscriptionSucceeded(channel, data: frame.data) ?? unknownChannel
        case "pusher_internal:member_added", "pusher_internal:member_removed":
            guard let channel = frame.channel, channels[channel]?.kind == .presence else {
                return [.ignoredFrame(event: frame.event, reason: "not a presence channel we are subscribed to")]
            }
            let added = frame.event == "pusher_internal:member_added"
            return channels.updateRecord(channel) { record in
                added
                    ? record.roster.memberAdded(channel: channel, data: frame.data)
                    : record.roster.memberRemoved(channel: channel, data: frame.data)
            } ?? []
        case "pusher:cache_miss":
            guard let channel = frame.channel, channels[channel] != nil else { return unknownChannel }
            return [.deliver(PusherEvent(name: "pusher:cache_miss", channel: channel, data: frame.data))]
        case "pusher_internal:subscription_count":
            guard let channel = frame.channel, channels[channel] != nil else { return unknownChannel }
            let event = PusherEvent(name: "pusher:subscription_count", channel: channel, data: frame.data)
            if let count = event.subscriptionCount {
                channels.updateRecord(channel) { $0.subscriptionCount = count }
            }
            return [.deliver(event)]
        case "pusher:signin_success":
            return userSession.signInSucceeded(data: frame.data, now: now)
        case "pusher_internal:watchlist_events":
            return userSession.watchlistEvents(data: frame.data)
        case "pusher:connection_established":
            return [.ignoredFrame(event: frame.event, reason: "already connected")]
        default:
            return applicationEvent(frame, socketID: socketID)
        }
    }

    private mutating func applicationEvent(_ frame: PusherFrame, socketID: String) -> [Action] {
        if EventName.isProtocolEvent(frame.event) {
            return [.ignoredFrame(event: frame.event, reason: "unknown protocol event")]
        }
        guard let channel = frame.channel else {
            return [.deliver(PusherEvent(name: frame.event, channel: nil, data: frame.data, userID: frame.userID))]
        }
        guard let record = channels[channel] else {
            return [.ignoredFrame(event: frame.event, reason: "event on a channel we are not subscribed to")]
        }
        guard record.kind == .privateEncrypted else {
            return [.deliver(PusherEvent(name: frame.event, channel: channel, data: frame.data, userID: frame.userID))]
        }
        // Encrypted channel: decrypt non-protocol events (docs/pusher-protocol.md §1 "Encrypted channels").
        return channels.updateRecord(channel) { $0.key.received(frame, channel: channel, socketID: socketID) } ?? []
    }

    // MARK: subscriptions

    /// The application asked to subscribe to `channel`, optionally with an auth it obtained
    /// itself (used for the next subscribe only: it is bound to one socket id).
    public mutating func subscribeRequested(
        _ channel: String,
        auth: PusherChannelAuth? = nil,
        now: ContinuousClock.Instant
    ) -> [Action] {
        if let problem = ChannelName.problem(with: channel) {
            return [.subscriptionFailed(channel: channel, error: .invalidArgument(problem, channel: channel))]
        }
        return channels.subscribeRequested(channel, auth: auth, socketID: socketID)
    }

    /// The application asked to unsubscribe; the server is told when connected.
    public mutating func unsubscribeRequested(_ channel: String, now: ContinuousClock.Instant) -> [Action] {
        channels.unsubscribeRequested(channel, connected: socketID != nil)
    }

    /// An ``Action/authorize(channel:socketID:)`` produced `auth`.
    public mutating func authorizationSucceeded(
        channel: String,
        socketID: String,
        auth: PusherChannelAuth,
        now: ContinuousClock.Instant
    ) -> [Action] {
        guard self.socketID == socketID, let record = channels[channel] else { return [] }
        if let actions = channels.authorizationSucceeded(channel, socketID: socketID, auth: auth) { return actions }
        switch record.state {
        case .subscribed, .subscribing:
            return channels.updateRecord(channel) { $0.key.refetchSucceeded(sharedSecret: auth.sharedSecret, channel: channel) } ?? []
        case .authorizing, .pending, .failed:
            return []
        }
    }

    /// An ``Action/authorize(channel:socketID:)`` failed.
    public mutating func authorizationFailed(channel: String, socketID: String, message: String) -> [Action] {
        guard self.socketID == socketID, let record = channels[channel] else { return [] }
        if let actions = channels.authorizationFailed(channel, socketID: socketID, message: message) { return actions }
        switch record.state {
        case .subscribed, .subscribing:
            return channels.updateRecord(channel) { $0.key.refetchFailed(channel: channel) } ?? []
        case .authorizing, .pending, .failed:
            return []
        }
    }
}
