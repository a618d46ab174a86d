import Locking
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import NIOWebSocket
import PusherProtocol
import ServiceLifecycle

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A Pusher Channels client (protocol 7) for Swift on Linux: the I/O owner around
/// ``PusherConnectionStateMachine``.
///
/// It opens the WebSocket, feeds every frame, close and deadline to the machine, and carries
/// out the actions it returns; it decides nothing itself. Start it with ``run()`` in a task (it
/// returns when that task is cancelled), then ``connect()``; subscribe before or after.
///
/// ```swift
/// let client = PusherClient(options: .init(key: "app-key", host: .host("127.0.0.1", port: 6001), encrypted: false))
/// try await withThrowingTaskGroup(of: Void.self) { group in
///     group.addTask { try await client.run() }
///     client.connect()
///     let prices = client.subscribe("market-data")
///     for await event in prices.events() { print(event.name, event.data ?? "") }
/// }
/// ```
///
/// Delivery: one reader per connection parses each frame once and hands the result to every
/// stream (``updates(bufferingPolicy:)``, ``events()``, a channel's ``PusherChannel/events()``…) in arrival order
/// without creating a task per frame; callbacks registered with `bind` run on that reader, so
/// they must be quick.
public final class PusherClient: Service, Sendable {
    /// The options this client was made with.
    public let options: PusherClientOptions
    let logger: Logger
    let state: Locked<State>
    let work: AsyncStream<Work>
    let workContinuation: AsyncStream<Work>.Continuation
    /// Wakes the timer before its deadline: an event brought the machine's deadline earlier.
    let timerWakeUps: AsyncStream<Void>
    let timerWakeUpContinuation: AsyncStream<Void>.Continuation
    let tlsConfiguration: TLSConfiguration?
    let connectionPool: PusherHTTPConnectionPool
    /// Where the WebSocket runs: NIO's shared group, or a test's own (to hold its loop).
    let eventLoopGroup: any EventLoopGroup

    /// Work for a child task of ``run()``.
    enum Work: Sendable {
        case openTransport
        case authorize(channel: String, socketID: String)
        case authenticateUser(socketID: String)
        case shutdown
    }

    /// What the current transport's writer must send.
    enum Outgoing: Sendable {
        case text(String)
        case close
    }

    /// A stream a consumer asked for, with what it wants to see.
    enum Sink: Sendable {
        case updates(AsyncStream<PusherUpdate>.Continuation)
        case batches(PusherUpdateBatches)
        case events(channel: String?, AsyncStream<PusherEvent>.Continuation)
        case presence(channel: String?, AsyncStream<PusherPresenceChange>.Continuation)
        case states(AsyncStream<PusherConnectionStateChange>.Continuation)
        case errors(AsyncStream<PusherError>.Continuation)
        case user(AsyncStream<PusherUserUpdate>.Continuation)
    }

    /// A callback registered with `bind`.
    struct Binding: Sendable {
        var channel: String?
        var eventName: String?
        var callback: @Sendable (PusherEvent) -> Void
    }

    /// Everything shared between the client's tasks, behind one lock.
    struct State: Sendable {
        var machine: PusherConnectionStateMachine
        var outgoing: AsyncStream<Outgoing>.Continuation?
        /// The machine asked to close while no transport was registered yet (it was still
        /// being opened): the transport closes as soon as it registers.
        var closePending = false
        /// The current transport's connection while its opening handshake is under way (`nil`
        /// before it is open and once the WebSocket runs): a drop asked for then closes it, since
        /// its writer, which carries out `.close`, only starts with the WebSocket.
        var handshakeChannel: (any Channel)?
        /// The current transport was dropped (closed as soon as its connection is open).
        var closeRequested = false
        var transportID = 0
        var sinks: [Int: Sink] = [:]
        var bindings: [Int: Binding] = [:]
        var nextID = 1
        var ignoredFrames = 0
        /// The deadline the timer sleeps until, and when it must be woken early.
        var timer = DeadlineTimer()
    }

    /// Thrown inside the WebSocket handler to end it after we sent a close frame.
    struct ClosedByClient: Error {}

    /// A client; nothing happens until ``run()`` is running and ``connect()`` was called.
    ///
    /// - Parameters:
    ///   - options: what to connect to and how.
    ///   - connectionPool: used for auth endpoints; defaults to ``PusherHTTPConnectionPool/shared``.
    ///   - logger: swift-log logger; metadata keys `pusher.channel`, `pusher.event`,
    ///     `pusher.socket_id`, `pusher.state`, `pusher.close_code`.
    public convenience init(
        options: PusherClientOptions, connectionPool: PusherHTTPConnectionPool = .shared, logger: Logger = Logger(label: "pusher")
    ) {
        self.init(options: options, connectionPool: connectionPool, eventLoopGroup: MultiThreadedEventLoopGroup.singleton, logger: logger)
    }

    /// A client whose WebSocket runs on `eventLoopGroup`.
    init(options: PusherClientOptions, connectionPool: PusherHTTPConnectionPool, eventLoopGroup: any EventLoopGroup, logger: Logger) {
        self.options = options
        self.logger = logger
        self.connectionPool = connectionPool
        self.eventLoopGroup = eventLoopGroup
        var generator = SystemRandomNumberGenerator()
        let machine = PusherConnectionStateMachine(
            configuration: .init(options: options),
            jitterSeed: generator.next()
        )
        self.state = Locked(State(machine: machine))
        (self.work, self.workContinuation) = AsyncStream.makeStream()
        (self.timerWakeUps, self.timerWakeUpContinuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
        if options.encrypted {
            var tls = TLSConfiguration.makeClientConfiguration()
            if let caFile = options.caFile { tls.trustRoots = .file(caFile) }
            // NIOSSL waits up to 5 s for the peer's close_notify; every reconnect waits for the
            // old connection to end, so keep that short.
            tls.shutdownTimeout = .seconds(1)
            self.tlsConfiguration = tls
        } else {
            self.tlsConfiguration = nil
        }
    }

    // MARK: lifecycle

    /// Runs the client's connection, timers and authorizations until the calling task is
    /// cancelled or — when run as a `Service` in a `ServiceGroup` — until graceful shutdown,
    /// which disconnects cleanly first (close frame, at most 3 s). Call it once, in its own
    /// task; everything else may be called from anywhere.
    public func run() async throws {
        await withGracefulShutdownHandler {
            // Children never throw: a cancelled timer just ends, so run() returns normally
            // after a graceful shutdown.
            await withDiscardingTaskGroup { group in
                group.addTask { await self.runTimer() }
                for await item in work {
                    switch item {
                    case .openTransport:
                        group.addTask { await self.runTransport() }
                    case .authorize(let channel, let socketID):
                        group.addTask { await self.authorize(channel: channel, socketID: socketID) }
                    case .authenticateUser(let socketID):
                        group.addTask { await self.authenticateUser(socketID: socketID) }
                    case .shutdown:
                        await self.disconnectAndWait(timeout: .seconds(3))
                        group.cancelAll()
                        return
                    }
                }
                group.cancelAll()
            }
        } onGracefulShutdown: {
            self.workContinuation.yield(.shutdown)
        }
    }

    /// Connect (or reconnect now, skipping a pending backoff delay).
    public func connect() {
        perform { $0.connectRequested(now: .now) }
    }

    /// Close the connection; subscriptions are kept and resent by the next ``connect()``.
    public func disconnect() {
        perform { $0.disconnectRequested(now: .now) }
    }

    /// ``disconnect()`` and wait until the connection is closed, at most `timeout`
    /// (``run()`` must be running for the close to happen).
    public func disconnectAndWait(timeout: Duration = .seconds(3)) async {
        let states = connectionStates()
        disconnect()
        guard connectionState != .disconnected else { return }
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for await change in states where change.current == .disconnected { return }
            }
            group.addTask { try? await Task.sleep(for: timeout) }
            await group.next()
            group.cancelAll()
        }
    }

    // MARK: queries

    /// The connection state.
    public var connectionState: PusherConnectionState { state.withLock { $0.machine.connectionState } }

    /// The current `socket_id` (pass it to the HTTP API to exclude this connection), when connected.
    public var socketID: String? { state.withLock { $0.machine.socketID } }

    /// How many received frames were not used (malformed, unknown event or channel).
    public var ignoredFrameCount: Int { state.withLock { $0.ignoredFrames } }

    // MARK: channels

    /// Subscribes to `channel` now or, if not connected, as soon as connected; again after every
    /// reconnect. `auth` is an authorization you obtained yourself, used for the next subscribe
    /// only (it is bound to one socket id); later ones use ``PusherClientOptions/authorization``.
    @discardableResult
    public func subscribe(_ channel: String, auth: PusherChannelAuth? = nil) -> PusherChannel {
        perform { $0.subscribeRequested(channel, auth: auth, now: .now) }
        return PusherChannel(name: channel, client: self)
    }

    /// Subscribes to presence channel `channel` (see ``subscribe(_:auth:)``).
    @discardableResult
    public func subscribeToPresenceChannel(_ channel: String, auth: PusherChannelAuth? = nil) -> PresenceChannel {
        PresenceChannel(channel: subscribe(channel, auth: auth))
    }

    /// Unsubscribes from `channel` and forgets it.
    public func unsubscribe(_ channel: String) {
        perform { $0.unsubscribeRequested(channel, now: .now) }
    }

    /// The channels asked for, in order.
    public var channelNames: [String] { state.withLock { $0.machine.channelNames } }

    /// A handle to a channel asked for earlier, or `nil`.
    public func channel(named name: String) -> PusherChannel? {
        state.withLock { $0.machine.hasChannel(name) } ? PusherChannel(name: name, client: self) : nil
    }

    func isSubscribed(_ channel: String) -> Bool { state.withLock { $0.machine.isSubscribed(channel) } }
    func members(of channel: String) -> [PusherMember] { state.withLock { $0.machine.members(of: channel) } }
    func me(of channel: String) -> PusherMember? { state.withLock { $0.machine.me(of: channel) } }
    func subscriptionCount(of channel: String) -> Int? { state.withLock { $0.machine.subscriptionCount(of: channel) } }

    /// Sends client event `event` (named `client-…`) on a subscribed private or presence channel;
    /// at most 10 per second (docs/pusher-protocol.md §1 "Client events").
    public func trigger(channel: String, event: String, data: String) throws(PusherError) {
        let result: Result<Void, PusherError> = state.withLock { state in
            do throws(PusherError) {
                let action = try state.machine.clientEventRequested(channel: channel, event: event, data: data, now: .now)
                if case .send(let text) = action {
                    guard let outgoing = state.outgoing else { return .failure(.notConnected("not connected", channel: channel)) }
                    outgoing.yield(.text(text))
                }
                return .success(())
            } catch {
                return .failure(error)
            }
        }
        try result.get()
    }
}
