import Backoff
import PusherProtocol

/// The Pusher protocol's decisions, with no I/O, no clock reads, no logging and no tasks.
///
/// Events are methods named for what happened (`connectRequested`, `receivedFrame`,
/// `transportClosed`, `tick`, …) and take the current time; each returns the actions the I/O
/// owner (``PusherClient``) must carry out, in order. Tests drive it with a manual clock
/// (`t0 + .seconds(n)`), never sleeping.
///
/// What it decides (PUSHER-PROTOCOL §1, DESIGN §5.5):
/// - handshake: wait for `pusher:connection_established` (at most `handshakeTimeout`);
/// - keep-alive: after `min(activityTimeout, server's activity_timeout)` of silence send
///   `pusher:ping`; no frame within `pongTimeout` → drop and reconnect; answer server pings;
/// - reconnect by close code: 4000–4099 refused (error; retry only at the backoff cap, or stop),
///   4100–4199 backoff (≥ 1 s), 4200–4299 at once within a random 0–500 ms (then backoff if it
///   keeps failing), others backoff; exponential delays with jitter and a cap from ``ReconnectPolicy``; the attempt
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
        /// A frame was not used (unknown event, unknown channel, malformed data); log at debug
        /// and count it (DESIGN §5.2).
        case ignoredFrame(event: String, reason: String)
    }

    private enum DropReason: Sendable {
        case pongTimeout
        case handshakeTimeout
        case protocolError
    }

    private struct Connection: Sendable {
        var socketID: String
        var activityTimeout: Duration
        var lastActivity: ContinuousClock.Instant
        var pingSentAt: ContinuousClock.Instant?
        var connectedAt: ContinuousClock.Instant
    }

    private enum Phase: Sendable {
        case idle
        case connecting(since: ContinuousClock.Instant)
        case connected(Connection)
        /// We asked the transport to close because of `reason`; waiting for it to end.
        case dropping(DropReason, connectedAt: ContinuousClock.Instant?)
        /// The application asked to disconnect; waiting for the transport to end.
        case disconnecting
        case waiting(until: ContinuousClock.Instant)
    }

    private enum ChannelState: Sendable, Equatable {
        case pending
        case authorizing(socketID: String)
        case subscribing
        case subscribed
        case failed
    }

    private enum KeyRefetch: Sendable {
        case none
        case inFlight(queued: [PusherFrame])
        /// A refetch happened and no event decrypted since: do not refetch again.
        case spent
    }

    private struct ChannelRecord: Sendable {
        let name: String
        let kind: ChannelKind
        var state: ChannelState = .pending
        var providedAuth: PusherChannelAuth?
        var channelData: String?
        var key: [UInt8]?
        var keyRefetch: KeyRefetch = .none
        var members: [PusherMember] = []
        var me: PusherMember?
    }

    /// Most encrypted events held while a channel's key is refetched.
    static let maxQueuedWhileRefetching = 1000

    private let configuration: Configuration
    private var phase: Phase = .idle
    private var attempt = 0
    private var channels: [String: ChannelRecord] = [:]
    private var channelOrder: [String] = []
    private var jitter: JitterSource
    private var clientEventTimes: [ContinuousClock.Instant] = []
    /// `connect()` came while the previous connection was still closing: connect once it is closed.
    private var connectAfterDisconnect = false

    /// A machine in state `disconnected`; `jitterSeed` makes the jitter reproducible in tests.
    public init(configuration: Configuration, jitterSeed: UInt64) {
        self.configuration = configuration
        self.jitter = JitterSource(seed: jitterSeed)
    }

    // MARK: queries

    /// The state PusherSwift users know.
    public var connectionState: PusherConnectionState { Self.state(of: phase) }

    /// The current connection's socket id, when connected.
    public var socketID: String? {
        if case .connected(let connection) = phase { return connection.socketID }
        return nil
    }

    /// The next time ``tick(now:)`` has something to do, or `nil`.
    public var nextDeadline: ContinuousClock.Instant? {
        switch phase {
        case .connecting(let since): since + configuration.handshakeTimeout
        case .connected(let c): c.pingSentAt.map { $0 + configuration.pongTimeout } ?? c.lastActivity + c.activityTimeout
        case .waiting(let until): until
        case .idle, .dropping, .disconnecting: nil
        }
    }

    /// The effective activity timeout of the current connection.
    public var activityTimeout: Duration? {
        if case .connected(let c) = phase { return c.activityTimeout }
        return nil
    }

    /// Failed attempts since the last stable connection.
    public var failedAttempts: Int { attempt }

    /// The channels the application asked for, in order.
    public var channelNames: [String] { channelOrder }

    /// Whether `channel` is currently subscribed on the server.
    public func isSubscribed(_ channel: String) -> Bool { channels[channel]?.state == .subscribed }

    /// The members of presence channel `channel` (empty until subscribed).
    public func members(of channel: String) -> [PusherMember] { channels[channel]?.members ?? [] }

    /// Our own member entry on presence channel `channel`.
    public func me(of channel: String) -> PusherMember? { channels[channel]?.me }

    // MARK: connection events

    /// The application asked to connect.
    public mutating func connectRequested(now: ContinuousClock.Instant) -> [Action] {
        switch phase {
        case .idle, .waiting:
            var actions: [Action] = []
            if case .idle = phase { attempt = 0 }
            transition(to: .connecting(since: now), &actions)
            actions.append(.openTransport)
            return actions
        case .disconnecting:
            connectAfterDisconnect = true
            return []
        case .connecting, .connected, .dropping:
            return []
        }
    }

    /// The application asked to disconnect. Channels are kept and resubscribed on the next connect.
    public mutating func disconnectRequested(now: ContinuousClock.Instant) -> [Action] {
        var actions: [Action] = []
        connectAfterDisconnect = false
        switch phase {
        case .connecting, .connected, .dropping:
            resetChannelsAfterLoss()
            transition(to: .disconnecting, &actions)
            actions.append(.closeTransport)
        case .waiting:
            resetChannelsAfterLoss()
            transition(to: .idle, &actions)
        case .idle, .disconnecting:
            break
        }
        return actions
    }

    /// The WebSocket ended with the server's close `code` (`nil`: no close frame).
    public mutating func transportClosed(code: UInt16?, now: ContinuousClock.Instant) -> [Action] {
        switch phase {
        case .idle, .waiting:
            return []
        case .disconnecting:
            var actions: [Action] = []
            transition(to: .idle, &actions)
            if connectAfterDisconnect {
                connectAfterDisconnect = false
                actions += connectRequested(now: now)
            }
            return actions
        case .dropping(let reason, let connectedAt):
            let action: CloseCodeAction =
                switch reason {
                case .pongTimeout: .reconnectImmediately  // like 4201 "pong reply not received"
                case .handshakeTimeout, .protocolError: .backoffUnknown
                }
            return afterLoss(action, closeCode: nil, connectedAt: connectedAt, now: now)
        case .connecting:
            let action = code.map { PusherCloseCode($0).action } ?? .backoffUnknown
            return afterLoss(action, closeCode: code, connectedAt: nil, now: now)
        case .connected(let c):
            let action = code.map { PusherCloseCode($0).action } ?? .backoffUnknown
            return afterLoss(action, closeCode: code, connectedAt: c.connectedAt, now: now)
        }
    }

    /// The WebSocket could not be opened or failed without a close frame.
    public mutating func transportFailed(message: String, now: ContinuousClock.Instant) -> [Action] {
        switch phase {
        case .connecting, .connected:
            var actions: [Action] = [.error(.transport(message))]
            actions += transportClosed(code: nil, now: now)
            return actions
        case .idle, .waiting, .disconnecting, .dropping:
            return transportClosed(code: nil, now: now)
        }
    }

    /// Time passed: send a ping, give up on a missing pong or handshake, start a due reconnect.
    public mutating func tick(now: ContinuousClock.Instant) -> [Action] {
        switch phase {
        case .connecting(let since):
            guard now >= since + configuration.handshakeTimeout else { return [] }
            return drop(.handshakeTimeout, connectedAt: nil)
        case .connected(var c):
            if let sent = c.pingSentAt {
                guard now >= sent + configuration.pongTimeout else { return [] }
                return drop(.pongTimeout, connectedAt: c.connectedAt)
            }
            guard now >= c.lastActivity + c.activityTimeout else { return [] }
            c.pingSentAt = now
            phase = .connected(c)
            return [.send(ClientFrame.ping)]
        case .waiting(let until):
            guard now >= until else { return [] }
            var actions: [Action] = []
            transition(to: .connecting(since: now), &actions)
            actions.append(.openTransport)
            return actions
        case .idle, .dropping, .disconnecting:
            return []
        }
    }

    // MARK: frames

    /// A text frame arrived (already decoded once by ``PusherFrame/parse(_:)``).
    public mutating func receivedFrame(_ frame: PusherFrame, now: ContinuousClock.Instant) -> [Action] {
        switch phase {
        case .connecting:
            return receivedDuringHandshake(frame, now: now)
        case .connected(var c):
            // Any frame counts as activity (PUSHER-PROTOCOL §1 "Keep-alive").
            c.lastActivity = now
            c.pingSentAt = nil
            phase = .connected(c)
            return receivedWhileConnected(frame, socketID: c.socketID, now: now)
        case .idle, .dropping, .disconnecting, .waiting:
            return [.ignoredFrame(event: frame.event, reason: "not connected")]
        }
    }

    /// A frame that could not be decoded.
    public mutating func receivedMalformedFrame(_ error: PusherFrameError, now: ContinuousClock.Instant) -> [Action] {
        if case .connected(var c) = phase {
            c.lastActivity = now
            c.pingSentAt = nil
            phase = .connected(c)
        }
        return [.ignoredFrame(event: "", reason: error.message)]
    }

    private mutating func receivedDuringHandshake(_ frame: PusherFrame, now: ContinuousClock.Instant) -> [Action] {
        switch frame.event {
        case "pusher:connection_established":
            guard let data = frame.data, let members = try? JSONScanner.object(data),
                case .string(let socketID)? = members["socket_id"], SocketID.isValid(socketID)
            else {
                var actions: [Action] = [.error(.malformedFrame("connection_established without a valid socket_id"))]
                actions += drop(.protocolError, connectedAt: nil)
                return actions
            }
            var activity = configuration.activityTimeout
            // The server's value can only lower ours. Compare before converting: a huge or
            // infinite value (`1e300`) would trap in `Int64(seconds * 1000)` (found by `make fuzz`).
            let ours = Double(activity.components.seconds) + Double(activity.components.attoseconds) / 1e18
            if case .raw(let text)? = members["activity_timeout"], let seconds = Double(text), seconds > 0, seconds < ours {
                activity = .milliseconds(Int64(seconds * 1000))
            }
            var actions: [Action] = []
            let connection = Connection(
                socketID: socketID,
                activityTimeout: activity,
                lastActivity: now,
                pingSentAt: nil,
                connectedAt: now
            )
            transition(to: .connected(connection), &actions)
            for name in channelOrder {
                actions += startSubscription(name, socketID: socketID)
            }
            return actions
        case "pusher:error":
            return [.error(Self.serverError(from: frame.data))]
        default:
            return [.ignoredFrame(event: frame.event, reason: "received before connection_established")]
        }
    }

    private mutating func receivedWhileConnected(_ frame: PusherFrame, socketID: String, now: ContinuousClock.Instant)
        -> [Action]
    {
        switch frame.event {
        case "pusher:ping":
            return [.send(ClientFrame.pong)]
        case "pusher:pong":
            return []
        case "pusher:error":
            return receivedError(frame)
        case "pusher:subscription_error":
            guard let channel = frame.channel, var record = channels[channel] else {
                return [.ignoredFrame(event: frame.event, reason: "unknown channel")]
            }
            record.state = .failed
            channels[channel] = record
            return [.subscriptionFailed(channel: channel, error: Self.subscriptionError(channel: channel, data: frame.data))]
        case "pusher_internal:subscription_succeeded":
            return subscriptionSucceeded(frame)
        case "pusher_internal:member_added":
            return memberAdded(frame)
        case "pusher_internal:member_removed":
            return memberRemoved(frame)
        case "pusher:cache_miss":
            guard let channel = frame.channel, channels[channel] != nil else {
                return [.ignoredFrame(event: frame.event, reason: "unknown channel")]
            }
            return [.deliver(PusherEvent(name: "pusher:cache_miss", channel: channel, data: frame.data))]
        case "pusher_internal:subscription_count":
            guard let channel = frame.channel, channels[channel] != nil else {
                return [.ignoredFrame(event: frame.event, reason: "unknown channel")]
            }
            return [.deliver(PusherEvent(name: "pusher:subscription_count", channel: channel, data: frame.data))]
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
        guard var record = channels[channel] else {
            return [.ignoredFrame(event: frame.event, reason: "event on a channel we are not subscribed to")]
        }
        guard record.kind == .privateEncrypted else {
            return [.deliver(PusherEvent(name: frame.event, channel: channel, data: frame.data, userID: frame.userID))]
        }
        // Encrypted channel: decrypt non-protocol events (PUSHER-PROTOCOL §1 "Encrypted channels").
        if case .inFlight(var queued) = record.keyRefetch {
            guard queued.count < Self.maxQueuedWhileRefetching else {
                return [.error(.decryptionFailed(channel: channel, event: frame.event))]
            }
            queued.append(frame)
            record.keyRefetch = .inFlight(queued: queued)
            channels[channel] = record
            return []
        }
        if let plaintext = decrypt(frame, key: record.key) {
            record.keyRefetch = .none
            channels[channel] = record
            return [.deliver(PusherEvent(name: frame.event, channel: channel, data: plaintext, userID: frame.userID))]
        }
        if case .spent = record.keyRefetch {
            return [.error(.decryptionFailed(channel: channel, event: frame.event))]
        }
        // One key refetch per failure streak: the server may have rotated the master key.
        record.keyRefetch = .inFlight(queued: [frame])
        channels[channel] = record
        return [.authorize(channel: channel, socketID: socketID)]
    }

    private func decrypt(_ frame: PusherFrame, key: [UInt8]?) -> String? {
        guard let key, let data = frame.data else { return nil }
        return SecretBox.openEventData(data, key: key)
    }

    private mutating func receivedError(_ frame: PusherFrame) -> [Action] {
        let error = Self.serverError(from: frame.data)
        if error.pusherCode == 4301 {
            return [.error(.clientEventRejected(channel: frame.channel, message: error.message, code: 4301))]
        }
        // Servers report a refused subscription as a plain pusher:error (code null or 4009) without
        // naming the channel field (PUSHER-PROTOCOL §1 "Subscribe"): attribute it when we can.
        let subscribing = channelOrder.filter { channels[$0]?.state == .subscribing }
        var culprit = frame.channel.flatMap { channels[$0] != nil ? $0 : nil }
        if culprit == nil {
            culprit = subscribing.first { error.message.contains($0) }
        }
        if culprit == nil, subscribing.count == 1, error.pusherCode == 4009 || error.pusherCode == nil {
            culprit = subscribing[0]
        }
        if let channel = culprit, var record = channels[channel], record.state == .subscribing {
            record.state = .failed
            channels[channel] = record
            return [
                .subscriptionFailed(
                    channel: channel,
                    error: .subscriptionFailed(channel: channel, message: error.message, code: error.pusherCode)
                )
            ]
        }
        return [.error(error)]
    }

    private mutating func subscriptionSucceeded(_ frame: PusherFrame) -> [Action] {
        guard let channel = frame.channel, var record = channels[channel] else {
            return [.ignoredFrame(event: frame.event, reason: "unknown channel")]
        }
        record.state = .subscribed
        var actions: [Action] = [.subscriptionSucceeded(channel: channel)]
        if record.kind == .presence {
            // The list replaces local state: appending duplicates members after a reconnect
            // (PusherSwift #370, PUSHER-PROTOCOL §1 "Presence").
            switch Self.presenceMembers(from: frame.data) {
            case .success(let members):
                record.members = members
            case .failure(let reason):
                record.members = []
                actions.append(.ignoredFrame(event: frame.event, reason: reason.reason))
            }
            record.me = Self.me(channelData: record.channelData, members: record.members)
            actions.append(.presence(.subscriptionSucceeded(channel: channel, members: record.members, me: record.me)))
        }
        channels[channel] = record
        return actions
    }

    private mutating func memberAdded(_ frame: PusherFrame) -> [Action] {
        guard let channel = frame.channel, var record = channels[channel], record.kind == .presence else {
            return [.ignoredFrame(event: frame.event, reason: "not a presence channel we are subscribed to")]
        }
        guard let member = Self.member(from: frame.data) else {
            return [.ignoredFrame(event: frame.event, reason: "member_added without user_id")]
        }
        if let index = record.members.firstIndex(where: { $0.userID == member.userID }) {
            record.members[index] = member
            channels[channel] = record
            return []
        }
        record.members.append(member)
        channels[channel] = record
        return [.presence(.memberAdded(channel: channel, member: member))]
    }

    private mutating func memberRemoved(_ frame: PusherFrame) -> [Action] {
        guard let channel = frame.channel, var record = channels[channel], record.kind == .presence else {
            return [.ignoredFrame(event: frame.event, reason: "not a presence channel we are subscribed to")]
        }
        guard let gone = Self.member(from: frame.data) else {
            return [.ignoredFrame(event: frame.event, reason: "member_removed without user_id")]
        }
        guard let index = record.members.firstIndex(where: { $0.userID == gone.userID }) else { return [] }
        let member = record.members.remove(at: index)
        channels[channel] = record
        return [.presence(.memberRemoved(channel: channel, member: member))]
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
        if channels[channel] != nil { return [] }
        var record = ChannelRecord(name: channel, kind: ChannelName(channel).kind)
        record.providedAuth = auth
        channels[channel] = record
        channelOrder.append(channel)
        if let socketID { return startSubscription(channel, socketID: socketID) }
        return []
    }

    /// The application asked to unsubscribe; the server is told when connected.
    public mutating func unsubscribeRequested(_ channel: String, now: ContinuousClock.Instant) -> [Action] {
        guard let record = channels.removeValue(forKey: channel) else { return [] }
        channelOrder.removeAll { $0 == channel }
        guard socketID != nil else { return [] }
        switch record.state {
        case .subscribing, .subscribed: return [.send(ClientFrame.unsubscribe(channel: channel))]
        case .pending, .authorizing, .failed: return []
        }
    }

    /// An ``Action/authorize(channel:socketID:)`` produced `auth`.
    public mutating func authorizationSucceeded(
        channel: String,
        socketID: String,
        auth: PusherChannelAuth,
        now: ContinuousClock.Instant
    ) -> [Action] {
        guard self.socketID == socketID, var record = channels[channel] else { return [] }
        switch record.state {
        case .authorizing(let asked) where asked == socketID:
            return sendSubscribe(&record, auth: auth)
        case .subscribed, .subscribing:
            guard case .inFlight(let queued) = record.keyRefetch else { return [] }
            record.key = auth.sharedSecret ?? record.key
            record.keyRefetch = .spent
            var actions: [Action] = []
            for frame in queued {
                if let plaintext = decrypt(frame, key: record.key) {
                    record.keyRefetch = .none
                    actions.append(
                        .deliver(PusherEvent(name: frame.event, channel: channel, data: plaintext, userID: frame.userID))
                    )
                } else {
                    actions.append(.error(.decryptionFailed(channel: channel, event: frame.event)))
                }
            }
            channels[channel] = record
            return actions
        case .authorizing, .pending, .failed:
            return []
        }
    }

    /// An ``Action/authorize(channel:socketID:)`` failed.
    public mutating func authorizationFailed(channel: String, socketID: String, message: String) -> [Action] {
        guard self.socketID == socketID, var record = channels[channel] else { return [] }
        switch record.state {
        case .authorizing(let asked) where asked == socketID:
            record.state = .failed
            channels[channel] = record
            return [.subscriptionFailed(channel: channel, error: .authorizationFailed(channel: channel, message: message))]
        case .subscribed, .subscribing:
            guard case .inFlight(let queued) = record.keyRefetch else { return [] }
            record.keyRefetch = .spent
            channels[channel] = record
            return queued.map { .error(.decryptionFailed(channel: channel, event: $0.event)) }
        case .authorizing, .pending, .failed:
            return []
        }
    }

    private mutating func startSubscription(_ channel: String, socketID: String) -> [Action] {
        guard var record = channels[channel] else { return [] }
        guard record.kind.requiresAuth else {
            record.state = .subscribing
            channels[channel] = record
            return [.send(ClientFrame.subscribe(channel: channel, auth: nil, channelData: nil))]
        }
        if let provided = record.providedAuth {
            record.providedAuth = nil
            return sendSubscribe(&record, auth: provided)
        }
        record.state = .authorizing(socketID: socketID)
        channels[channel] = record
        return [.authorize(channel: channel, socketID: socketID)]
    }

    private mutating func sendSubscribe(_ record: inout ChannelRecord, auth: PusherChannelAuth) -> [Action] {
        let channel = record.name
        if record.kind == .presence, auth.channelData == nil {
            record.state = .failed
            channels[channel] = record
            return [
                .subscriptionFailed(
                    channel: channel,
                    error: .authorizationFailed(channel: channel, message: "presence auth has no channel_data")
                )
            ]
        }
        if record.kind == .privateEncrypted {
            guard let secret = auth.sharedSecret else {
                record.state = .failed
                channels[channel] = record
                return [
                    .subscriptionFailed(
                        channel: channel,
                        error: .authorizationFailed(channel: channel, message: "encrypted channel auth has no shared_secret")
                    )
                ]
            }
            record.key = secret
            record.keyRefetch = .none
        }
        record.channelData = auth.channelData
        record.state = .subscribing
        channels[channel] = record
        return [.send(ClientFrame.subscribe(channel: channel, auth: auth.auth, channelData: auth.channelData))]
    }

    // MARK: client events

    /// The application wants to send client event `event` on `channel` (PUSHER-PROTOCOL §1
    /// "Client events": `client-*`, private/presence only, after subscription, ≤ 10 per second).
    public mutating func clientEventRequested(
        channel: String,
        event: String,
        data: String,
        now: ContinuousClock.Instant
    ) throws(PusherError) -> Action {
        guard EventName.isClientEvent(event) else {
            throw .clientEventRejected(channel: channel, message: "client event names must start with 'client-'")
        }
        guard event.utf8.count <= PusherLimits.eventNameLength else {
            throw .clientEventRejected(channel: channel, message: "event name is longer than \(PusherLimits.eventNameLength)")
        }
        guard data.utf8.count <= PusherLimits.eventDataBytes else {
            throw .clientEventRejected(channel: channel, message: "data is larger than \(PusherLimits.eventDataBytes) bytes")
        }
        guard ChannelName(channel).kind.allowsClientEvents else {
            throw .clientEventRejected(channel: channel, message: "client events are only allowed on private and presence channels")
        }
        guard socketID != nil, channels[channel]?.state == .subscribed else {
            throw .notConnected("client events need a subscribed channel", channel: channel)
        }
        clientEventTimes.removeAll { now - $0 >= .seconds(1) }
        guard clientEventTimes.count < PusherLimits.clientEventsPerSecond else {
            throw .clientEventRejected(
                channel: channel,
                message: "more than \(PusherLimits.clientEventsPerSecond) client events per second",
                code: 4301
            )
        }
        clientEventTimes.append(now)
        return .send(ClientFrame.clientEvent(channel: channel, event: event, data: data))
    }

    // MARK: loss and reconnect

    private mutating func drop(_ reason: DropReason, connectedAt: ContinuousClock.Instant?) -> [Action] {
        var actions: [Action] = []
        transition(to: .dropping(reason, connectedAt: connectedAt), &actions)
        actions.append(.closeTransport)
        return actions
    }

    /// After the server forgot our subscriptions: everything must be sent again, with new auth.
    private mutating func resetChannelsAfterLoss() {
        for name in channelOrder {
            guard var record = channels[name] else { continue }
            record.state = .pending
            record.members = []
            record.me = nil
            if case .inFlight = record.keyRefetch { record.keyRefetch = .none }
            channels[name] = record
        }
        clientEventTimes.removeAll()
    }

    /// How long a connection must have been up for a 4200–4299 close to reconnect at once even
    /// after earlier reconnects (at most one reconnect per this interval: never a hot loop).
    static let immediateReconnectAfterUptime: Duration = .seconds(2)

    /// The longest wait of a reconnect "at once" (4200–4299, pong timeout): the delay is drawn
    /// uniformly from zero to this.
    static let immediateReconnectSpread: Duration = .milliseconds(500)

    private mutating func afterLoss(
        _ action: CloseCodeAction,
        closeCode: UInt16?,
        connectedAt: ContinuousClock.Instant?,
        now: ContinuousClock.Instant
    ) -> [Action] {
        resetChannelsAfterLoss()
        var actions: [Action] = []
        let policy = configuration.reconnectPolicy
        if let connectedAt, now - connectedAt >= policy.stableAfter { attempt = 0 }
        // 4200–4299 on a connection that worked for a while is the server asking for a new one
        // (DESIGN §5.5: "reconnect at once"), not a failed attempt: start the count over, or 20
        // such closes within `stableAfter` would climb to the backoff cap (seen in the fault
        // matrix, Tests/faults, row close-4200). A server that closes sooner still gets backoff.
        if case .reconnectImmediately = action, let connectedAt, now - connectedAt >= Self.immediateReconnectAfterUptime {
            attempt = 0
        }
        if case .doNotRetryUnchanged = action {
            let code = Int(closeCode ?? 0)
            actions.append(.error(.connectionRefused(closeCode: code, reason: PusherCloseCode(UInt16(code)).reason)))
        }
        let refusedAndStop: Bool =
            if case .doNotRetryUnchanged = action { !configuration.retryAfterRefusal } else { false }
        guard configuration.autoReconnect, !refusedAndStop else {
            transition(to: .idle, &actions)
            return actions
        }
        guard policy.allowsAttempt(attempt) else {
            actions.append(.error(.gaveUp(attempts: attempt)))
            transition(to: .idle, &actions)
            return actions
        }
        let delay: Duration =
            switch action {
            // 4200–4299: at once, spread at random over at most 500 ms whatever the policy's
            // initial delay (DESIGN §5.5), so a fleet the server closes together does not return
            // together — unless the last attempt already failed, so a server that closes every
            // new connection with 4200 cannot make us spin.
            case .reconnectImmediately:
                attempt == 0 ? Self.immediateReconnectSpread * jitter.next() : policy.delay(attempt: attempt, unitRandom: jitter.next())
            // 4100–4199: backoff, at least 1 s (PUSHER-PROTOCOL §1 "Close codes").
            case .backoff: max(.seconds(1), policy.delay(attempt: attempt, unitRandom: jitter.next()))
            case .backoffUnknown: policy.delay(attempt: attempt, unitRandom: jitter.next())
            // 4000–4099: never a hot loop; only at the cap (DESIGN §5.5).
            case .doNotRetryUnchanged: policy.delay(attempt: Int(Int32.max), unitRandom: jitter.next())
            }
        attempt += 1
        if delay == .zero {
            actions.append(.reconnectScheduled(after: .zero, attempt: attempt))
            transition(to: .connecting(since: now), &actions)
            actions.append(.openTransport)
        } else {
            transition(to: .waiting(until: now + delay), &actions)
            actions.append(.reconnectScheduled(after: delay, attempt: attempt))
        }
        return actions
    }

    private mutating func transition(to next: Phase, _ actions: inout [Action]) {
        let before = Self.state(of: phase)
        phase = next
        let after = Self.state(of: next)
        if before != after {
            actions.append(
                .connectionStateChanged(PusherConnectionStateChange(previous: before, current: after, socketID: socketID))
            )
        }
    }

    private static func state(of phase: Phase) -> PusherConnectionState {
        switch phase {
        case .idle: .disconnected
        case .connecting: .connecting
        case .connected: .connected
        case .dropping, .waiting: .reconnecting
        case .disconnecting: .disconnecting
        }
    }

    // MARK: data decoding

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

    private static func me(channelData: String?, members: [PusherMember]) -> PusherMember? {
        guard let own = member(from: channelData) else { return nil }
        return members.first { $0.userID == own.userID } ?? own
    }
}

/// SplitMix64: a tiny seeded generator, so the machine's jitter is data, not a clock or a
/// global generator — tests reproduce every delay.
struct JitterSource: Sendable {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    /// A value in [0, 1].
    mutating func next() -> Double {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        z ^= z >> 31
        return Double(z >> 11) / Double(1 << 53)
    }
}
