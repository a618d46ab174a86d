import Locking
import Logging
import NIOCore
import PusherProtocol

/// The queue into one connection's writer task. Yielding never blocks, so a publish never
/// waits for a slow socket (and never holds a lock while a socket is written).
///
/// The queue is bounded (``PusherLocalConfiguration/maxQueuedFrames``): a client that stops
/// reading is disconnected once that many frames wait for it, instead of growing the server's
/// memory without end.
struct Outbox: Sendable {
    let continuation: AsyncStream<OutboundItem>.Continuation

    /// A new queue holding at most `limit` frames, and the stream its writer reads.
    static func make(limit: Int) -> (AsyncStream<OutboundItem>, Outbox) {
        let (stream, continuation) = AsyncStream.makeStream(of: OutboundItem.self, bufferingPolicy: .bufferingOldest(limit))
        return (stream, Outbox(continuation: continuation))
    }

    /// Queues `item`; false when the queue was full (the connection is then ended: its writer
    /// sends what is queued and stops).
    @discardableResult
    func send(_ item: OutboundItem) -> Bool {
        switch continuation.yield(item) {
        case .enqueued, .terminated: return true
        case .dropped:
            continuation.finish()
            return false
        @unknown default: return true
        }
    }
}

/// One app's live state: the pure ``AppHub`` plus the outboxes of its connections, under one
/// mutex per app. The I/O owner: it carries out the hub's actions outside the lock.
final class LiveApp: Sendable {
    struct State {
        var hub: AppHub
        var outboxes: [ConnectionID: Outbox] = [:]
        var faults = FaultSwitches()
    }

    let app: PusherLocalApp
    let state: Locked<State>
    let webhooks: WebhookSender?
    let logger: Logger

    init(
        app: PusherLocalApp, activityTimeoutSeconds: Int, subscriptionCountEvents: Bool = false,
        users: PusherLocalUserSettings = PusherLocalUserSettings(), webhooks: WebhookSender?, logger: Logger
    ) {
        self.app = app
        var hub = AppHub(app: app, activityTimeoutSeconds: activityTimeoutSeconds, subscriptionCountEvents: subscriptionCountEvents)
        hub.watchlistEvents = users.watchlistEvents
        hub.signinTimeout = users.signinTimeout
        self.state = Locked(State(hub: hub))
        self.webhooks = webhooks
        var logger = logger
        logger[metadataKey: "pusher.app"] = .string(app.id)
        self.logger = logger
    }

    /// A hub action with its connection ids resolved to outboxes (done under the lock).
    enum Resolved: Sendable {
        case one(Outbox, String)
        case many([Outbox], String)
        case close(Outbox, code: UInt16, reason: String)
        case webhook(PusherWebhookEvent)
    }

    /// Runs `decide` on the hub under the lock, then carries out its actions without the lock.
    @discardableResult
    func perform<T: Sendable>(_ decide: (inout State) -> (T, [HubAction])) -> T {
        let (value, resolved) = state.withLock { state -> (T, [Resolved]) in
            let (value, actions) = decide(&state)
            var resolved: [Resolved] = []
            resolved.reserveCapacity(actions.count)
            for action in actions {
                switch action {
                case .send(let id, let text):
                    if let outbox = state.outboxes[id] { resolved.append(.one(outbox, text)) }
                case .deliver(let text, let ids):
                    var outboxes: [Outbox] = []
                    outboxes.reserveCapacity(ids.count)
                    for id in ids { if let outbox = state.outboxes[id] { outboxes.append(outbox) } }
                    resolved.append(.many(outboxes, text))
                case .close(let id, let code, let reason):
                    if let outbox = state.outboxes[id] { resolved.append(.close(outbox, code: code, reason: reason)) }
                case .webhook(let event):
                    resolved.append(.webhook(event))
                }
            }
            return (value, resolved)
        }
        var overflowed = 0
        for item in resolved {
            switch item {
            case .one(let outbox, let text):
                if !outbox.send(.text(ByteBuffer(string: text))) { overflowed += 1 }
            case .many(let outboxes, let text):
                // Encoded once; ByteBuffer is copy-on-write, so every recipient shares the bytes.
                let buffer = ByteBuffer(string: text)
                for outbox in outboxes where !outbox.send(.text(buffer)) { overflowed += 1 }
            case .close(let outbox, let code, let reason):
                outbox.send(.close(code: code, reason: reason))
            case .webhook(let event):
                webhooks?.post(event, app: app)
            }
        }
        if overflowed > 0 {
            logger.warning("Slow client disconnected: send queue full", metadata: ["pusher.connections": "\(overflowed)"])
        }
        return value
    }

    /// Registers a new connection (from `remote`, `ip:port`): picks a unique socket id and greets the client.
    func connect(_ id: ConnectionID, outbox: Outbox, remote: String? = nil) -> String {
        perform { state in
            var socketID = Self.makeSocketID()
            while state.hub.isSocketIDInUse(socketID) { socketID = Self.makeSocketID() }
            state.outboxes[id] = outbox
            return (socketID, state.hub.connected(id, socketID: socketID, remote: remote))
        }
    }

    /// Removes a connection that ended.
    func disconnect(_ id: ConnectionID) {
        perform { state in
            state.outboxes[id] = nil
            return ((), state.hub.disconnected(id))
        }
    }

    /// A text frame from a client.
    func received(_ text: String, from id: ConnectionID, now: ContinuousClock.Instant, logger: Logger) {
        let refused = perform { state in
            let before = state.hub.counters
            let actions = state.hub.received(text, from: id, now: now, answerPings: state.faults.answerPings)
            let after = state.hub.counters
            let refused =
                after.badFrames > before.badFrames || after.refusedSubscriptions > before.refusedSubscriptions
                || after.refusedClientEvents > before.refusedClientEvents || after.refusedSignins > before.refusedSignins
            return (refused, actions)
        }
        if refused {
            // Counted in the hub's counters; the client got a pusher:error saying why.
            logger.debug("Frame refused", metadata: ["pusher.frame": "\(text.prefix(200))"])
        }
    }

    /// The sign-in timeout of connection `id` has passed (closed with 4009 unless signed in).
    func signinDeadlineReached(_ id: ConnectionID) {
        perform { state in ((), state.hub.signinDeadlineReached(id)) }
    }

    /// `POST /apps/ID/users/USER/terminate_connections`: the number of connections closed.
    func terminateUserConnections(_ userID: String) -> Int {
        perform { state in
            let actions = state.hub.terminateUserConnections(userID)
            return (actions.count, actions)
        }
    }

    /// The sign-in timeout of this app's connections, if it requires sign-in.
    var signinTimeout: Duration? { state.withLock { $0.hub.signinTimeout } }

    /// `digits.digits`, as Pusher's socket ids look (docs/pusher-protocol.md §1, "Handshake").
    static func makeSocketID() -> String {
        "\(UInt32.random(in: 1...UInt32.max)).\(UInt32.random(in: 1...UInt32.max))"
    }
}
