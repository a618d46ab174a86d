import AsyncHTTPClient
import Foundation
import Locking
import Logging
import NIOCore
import NIOHTTP1
import NIOSSL
import NIOWebSocket
import PusherProtocol
import ServiceLifecycle
import WSClient

/// A Pusher Channels client (protocol 7) for Swift on Linux: the I/O owner around
/// ``PusherConnectionStateMachine``.
///
/// It opens the WebSocket, feeds every frame, close and timer tick to the machine, and carries
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
/// stream (``updates()``, ``events()``, a channel's ``PusherChannel/events()``…) in arrival order
/// without creating a task per frame; callbacks registered with `bind` run on that reader, so
/// they must be quick.
public final class PusherClient: Service, Sendable {
    /// The options this client was made with.
    public let options: PusherClientOptions
    private let logger: Logger
    private let state: Locked<State>
    private let work: AsyncStream<Work>
    private let workContinuation: AsyncStream<Work>.Continuation
    private let tlsConfiguration: TLSConfiguration?
    private let httpClient: HTTPClient

    private enum Work: Sendable {
        case openTransport
        case authorize(channel: String, socketID: String)
        case shutdown
    }

    private enum Outgoing: Sendable {
        case text(String)
        case close
    }

    private enum Sink: Sendable {
        case updates(AsyncStream<PusherUpdate>.Continuation)
        case events(channel: String?, AsyncStream<PusherEvent>.Continuation)
        case presence(channel: String?, AsyncStream<PusherPresenceChange>.Continuation)
        case states(AsyncStream<PusherConnectionStateChange>.Continuation)
        case errors(AsyncStream<PusherError>.Continuation)
    }

    private struct Binding: Sendable {
        var channel: String?
        var eventName: String?
        var callback: @Sendable (PusherEvent) -> Void
    }

    private struct State: Sendable {
        var machine: PusherConnectionStateMachine
        var outgoing: AsyncStream<Outgoing>.Continuation?
        /// The machine asked to close while no transport was registered yet (it was still
        /// being opened): the transport closes as soon as it registers.
        var closePending = false
        var transportID = 0
        var sinks: [Int: Sink] = [:]
        var bindings: [Int: Binding] = [:]
        var nextID = 1
        var ignoredFrames = 0
    }

    /// Thrown inside the WebSocket handler to end it after we sent a close frame.
    private struct ClosedByClient: Error {}

    /// A client; nothing happens until ``run()`` is running and ``connect()`` was called.
    ///
    /// - Parameters:
    ///   - options: what to connect to and how.
    ///   - httpClient: used for auth endpoints; defaults to the shared client.
    ///   - logger: swift-log logger; metadata keys `pusher.channel`, `pusher.event`,
    ///     `pusher.socket_id`, `pusher.state`, `pusher.close_code`.
    public init(options: PusherClientOptions, httpClient: HTTPClient = .shared, logger: Logger = Logger(label: "pusher")) {
        self.options = options
        self.logger = logger
        self.httpClient = httpClient
        var generator = SystemRandomNumberGenerator()
        let machine = PusherConnectionStateMachine(
            configuration: .init(options: options),
            jitterSeed: generator.next()
        )
        self.state = Locked(State(machine: machine))
        (self.work, self.workContinuation) = AsyncStream.makeStream()
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
        state.withLock { $0.machine.channelNames.contains(name) } ? PusherChannel(name: name, client: self) : nil
    }

    func isSubscribed(_ channel: String) -> Bool { state.withLock { $0.machine.isSubscribed(channel) } }
    func members(of channel: String) -> [PusherMember] { state.withLock { $0.machine.members(of: channel) } }
    func me(of channel: String) -> PusherMember? { state.withLock { $0.machine.me(of: channel) } }

    /// Sends client event `event` (named `client-…`) on a subscribed private or presence channel;
    /// at most 10 per second (PUSHER-PROTOCOL §1 "Client events").
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

    // MARK: streams

    /// Everything, in one ordered stream: events of every channel, presence changes,
    /// subscription results, connection state changes and errors.
    public func updates(bufferingPolicy: AsyncStream<PusherUpdate>.Continuation.BufferingPolicy = .unbounded)
        -> AsyncStream<PusherUpdate>
    {
        let (stream, continuation) = AsyncStream.makeStream(of: PusherUpdate.self, bufferingPolicy: bufferingPolicy)
        addSink(.updates(continuation))
        return stream
    }

    /// Events of every channel (and connection-wide events).
    public func events() -> AsyncStream<PusherEvent> { events(channel: nil) }

    func events(channel: String?) -> AsyncStream<PusherEvent> {
        let (stream, continuation) = AsyncStream.makeStream(of: PusherEvent.self)
        addSink(.events(channel: channel, continuation))
        return stream
    }

    func presenceChanges(channel: String?) -> AsyncStream<PusherPresenceChange> {
        let (stream, continuation) = AsyncStream.makeStream(of: PusherPresenceChange.self)
        addSink(.presence(channel: channel, continuation))
        return stream
    }

    /// Connection state changes.
    public func connectionStates() -> AsyncStream<PusherConnectionStateChange> {
        let (stream, continuation) = AsyncStream.makeStream(of: PusherConnectionStateChange.self)
        addSink(.states(continuation))
        return stream
    }

    /// Errors, including failed subscriptions.
    public func errors() -> AsyncStream<PusherError> {
        let (stream, continuation) = AsyncStream.makeStream(of: PusherError.self)
        addSink(.errors(continuation))
        return stream
    }

    private func addSink(_ sink: Sink) {
        // No `onTermination` handler: it would take our lock from the task-cancellation path
        // (under the cancelled task's status lock) while a reader holding our lock resumes that
        // task — a lock-order inversion that can stall the cooperative pool. Ended streams are
        // removed instead when a yield reports `.terminated`.
        state.withLock { state in
            state.sinks[state.nextID] = sink
            state.nextID += 1
        }
    }

    // MARK: callback bindings (PusherSwift style)

    /// Calls `callback` for every event named `eventName` (or every event when `nil`) on any
    /// channel. Returns the binding id for ``unbind(_:)``.
    @discardableResult
    public func bind(eventName: String? = nil, callback: @escaping @Sendable (PusherEvent) -> Void) -> String {
        bind(channel: nil, eventName: eventName, callback: callback)
    }

    func bind(channel: String?, eventName: String?, callback: @escaping @Sendable (PusherEvent) -> Void) -> String {
        state.withLock { state in
            let id = state.nextID
            state.nextID += 1
            state.bindings[id] = Binding(channel: channel, eventName: eventName, callback: callback)
            return String(id)
        }
    }

    /// Removes the binding with this id.
    public func unbind(_ callbackID: String) {
        guard let id = Int(callbackID) else { return }
        _ = state.withLock { $0.bindings.removeValue(forKey: id) }
    }

    /// Removes every client-wide binding (channel bindings stay).
    public func unbindAll() {
        state.withLock { state in state.bindings = state.bindings.filter { $0.value.channel != nil } }
    }

    func unbindAll(channel: String) {
        state.withLock { state in state.bindings = state.bindings.filter { $0.value.channel != channel } }
    }

    // MARK: carrying out actions

    private struct Followups {
        var work: [Work] = []
        var callbacks: [(@Sendable (PusherEvent) -> Void, PusherEvent)] = []
        var logs: [PusherConnectionStateMachine.Action] = []
    }

    /// Runs one machine event under the lock, sends frames and feeds streams in order while
    /// still holding it (so every stream sees one global order), then — outside the lock —
    /// starts work, runs callbacks and logs.
    private func perform(_ event: (inout PusherConnectionStateMachine) -> [PusherConnectionStateMachine.Action]) {
        let followups = state.withLock { state -> Followups in
            var followups = Followups()
            let actions = event(&state.machine)
            for action in actions {
                switch action {
                case .openTransport:
                    state.closePending = false
                    followups.work.append(.openTransport)
                case .closeTransport:
                    if let outgoing = state.outgoing {
                        outgoing.yield(.close)
                    } else {
                        state.closePending = true
                    }
                case .send(let text):
                    state.outgoing?.yield(.text(text))
                case .authorize(let channel, let socketID):
                    followups.work.append(.authorize(channel: channel, socketID: socketID))
                case .connectionStateChanged(let change):
                    Self.feed(.connectionStateChanged(change), to: &state.sinks)
                    followups.logs.append(action)
                case .reconnectScheduled:
                    followups.logs.append(action)
                case .deliver(let event):
                    Self.feed(.event(event), to: &state.sinks)
                    for binding in state.bindings.values
                    where (binding.channel == nil || binding.channel == event.channel)
                        && (binding.eventName == nil || binding.eventName == event.name)
                    {
                        followups.callbacks.append((binding.callback, event))
                    }
                case .subscriptionSucceeded(let channel):
                    Self.feed(.subscriptionSucceeded(channel: channel), to: &state.sinks)
                    followups.logs.append(action)
                case .presence(let change):
                    Self.feed(.presence(change), to: &state.sinks)
                case .subscriptionFailed(let channel, let error):
                    Self.feed(.subscriptionFailed(channel: channel, error: error), to: &state.sinks)
                    followups.logs.append(action)
                case .error(let error):
                    Self.feed(.error(error), to: &state.sinks)
                    followups.logs.append(action)
                case .ignoredFrame:
                    state.ignoredFrames += 1
                    followups.logs.append(action)
                }
            }
            return followups
        }
        for item in followups.work { workContinuation.yield(item) }
        for (callback, event) in followups.callbacks { callback(event) }
        for action in followups.logs { log(action) }
    }

    /// Yields `update` to every stream that wants it; streams whose consumer went away are removed.
    private static func feed(_ update: PusherUpdate, to sinks: inout [Int: Sink]) {
        var ended: [Int] = []
        for (id, sink) in sinks {
            let result: Bool
            switch sink {
            case .updates(let continuation):
                result = isTerminated(continuation.yield(update))
            case .events(let channel, let continuation):
                guard case .event(let event) = update, channel == nil || channel == event.channel else { continue }
                result = isTerminated(continuation.yield(event))
            case .presence(let channel, let continuation):
                guard case .presence(let change) = update, channel == nil || channel == change.channel else { continue }
                result = isTerminated(continuation.yield(change))
            case .states(let continuation):
                guard case .connectionStateChanged(let change) = update else { continue }
                result = isTerminated(continuation.yield(change))
            case .errors(let continuation):
                switch update {
                case .error(let error), .subscriptionFailed(_, let error):
                    result = isTerminated(continuation.yield(error))
                case .event, .presence, .subscriptionSucceeded, .connectionStateChanged:
                    continue
                }
            }
            if result { ended.append(id) }
        }
        for id in ended { sinks.removeValue(forKey: id) }
    }

    private static func isTerminated<T>(_ result: AsyncStream<T>.Continuation.YieldResult) -> Bool {
        if case .terminated = result { return true }
        return false
    }

    private func log(_ action: PusherConnectionStateMachine.Action) {
        switch action {
        case .connectionStateChanged(let change):
            var metadata: Logger.Metadata = ["pusher.state": "\(change.current)"]
            if let socketID = change.socketID { metadata["pusher.socket_id"] = "\(socketID)" }
            if change.current == .connected {
                logger.info("Pusher connected", metadata: metadata)
            } else {
                logger.debug("Pusher connection state changed", metadata: metadata)
            }
        case .reconnectScheduled(let delay, let attempt):
            logger.info("Pusher reconnect scheduled", metadata: ["pusher.delay": "\(delay)", "pusher.attempt": "\(attempt)"])
        case .subscriptionSucceeded(let channel):
            logger.debug("Pusher subscription succeeded", metadata: ["pusher.channel": "\(channel)"])
        case .subscriptionFailed(let channel, let error):
            logger.warning("Pusher subscription failed", metadata: ["pusher.channel": "\(channel)", "pusher.error": "\(error)"])
        case .error(let error):
            if error.isConnectionRefused || error.isGaveUp {
                logger.error("Pusher connection refused", metadata: ["pusher.error": "\(error)"])
            } else {
                logger.warning("Pusher error", metadata: ["pusher.error": "\(error)"])
            }
        case .ignoredFrame(let event, let reason):
            logger.debug("Pusher frame ignored", metadata: ["pusher.event": "\(event)", "pusher.reason": "\(reason)"])
        case .openTransport, .closeTransport, .send, .authorize, .deliver, .presence:
            break
        }
    }

    // MARK: transport

    private func runTimer() async {
        while !Task.isCancelled {
            let now = ContinuousClock.now
            let deadline = state.withLock { $0.machine.nextDeadline }
            // Wake at the machine's deadline, but at least every 100 ms so a deadline set by
            // another task (ping sent, reconnect scheduled) is noticed promptly.
            let wake = min(deadline ?? now + .milliseconds(100), now + .milliseconds(100))
            do {
                try await Task.sleep(until: wake, clock: .continuous)
            } catch {
                return
            }
            perform { $0.tick(now: .now) }
        }
    }

    private func runTransport() async {
        let (outgoing, continuation) = AsyncStream.makeStream(of: Outgoing.self)
        let transportID = state.withLock { state in
            state.transportID += 1
            state.outgoing = continuation
            if state.closePending {
                state.closePending = false
                continuation.yield(.close)
            }
            return state.transportID
        }
        /// Unregister before telling the machine, so a close it asks for from now on is kept
        /// for the next transport's opening instead of going to this finished one.
        @Sendable func unregister() {
            continuation.finish()
            state.withLock { state in
                if state.transportID == transportID { state.outgoing = nil }
            }
        }
        var configuration = WebSocketClientConfiguration(maxFrameSize: options.maxFrameSize, closeTimeout: .seconds(2))
        configuration.validateUTF8 = true
        configuration.sniHostname = options.tlsServerName
        let maxFrameSize = options.maxFrameSize
        logger.debug("Pusher opening connection", metadata: ["pusher.url": "\(options.url)"])
        do {
            let closeFrame = try await WebSocketClient.connect(
                url: options.url,
                configuration: configuration,
                tlsConfiguration: tlsConfiguration,
                logger: logger
            ) { inbound, outbound, _ in
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        for await item in outgoing {
                            switch item {
                            case .text(let text):
                                try await outbound.write(.text(text))
                            case .close:
                                try await outbound.close(.normalClosure, reason: nil)
                                throw ClosedByClient()
                            }
                        }
                    }
                    group.addTask {
                        // Keep reading at all times: swift-websocket answers pings only while
                        // inbound is read (SWIFT-STACK.md).
                        for try await message in inbound.messages(maxSize: maxFrameSize) {
                            switch message {
                            case .text(let text): self.received(text)
                            case .binary: self.receivedBinary()
                            }
                        }
                    }
                    _ = try await group.next()
                    group.cancelAll()
                }
            }
            let code = closeFrame.map { UInt16(webSocketErrorCode: $0.closeCode) }
            if let code {
                logger.debug("Pusher connection closed", metadata: ["pusher.close_code": "\(code)"])
            }
            unregister()
            perform { $0.transportClosed(code: code, now: .now) }
        } catch {
            unregister()
            // Cancelled because run() is ending: not a connection failure to report or retry.
            if Task.isCancelled { return }
            perform { $0.transportFailed(message: "\(error)", now: .now) }
        }
    }

    private func received(_ text: String) {
        let now = ContinuousClock.now
        let frame: PusherFrame
        do {
            frame = try PusherFrame.parse(text)
        } catch {
            perform { $0.receivedMalformedFrame(error, now: now) }
            return
        }
        perform { $0.receivedFrame(frame, now: now) }
    }

    private func receivedBinary() {
        let now = ContinuousClock.now
        perform { $0.receivedMalformedFrame(PusherFrameError(message: "binary frame (Pusher uses text frames only)"), now: now) }
    }

    // MARK: authorization

    private func authorize(channel: String, socketID: String) async {
        let request = PusherAuthRequest(socketID: socketID, channelName: channel)
        do {
            let auth = try await obtainAuth(request)
            perform { $0.authorizationSucceeded(channel: channel, socketID: socketID, auth: auth, now: .now) }
        } catch {
            perform { $0.authorizationFailed(channel: channel, socketID: socketID, message: "\(error)") }
        }
    }

    private func obtainAuth(_ request: PusherAuthRequest) async throws -> PusherChannelAuth {
        switch options.authorization {
        case .none:
            throw PusherError.authorizationFailed(channel: request.channelName, message: "no authorization method configured")
        case .inline(let signer):
            return try signer.authorize(request)
        case .authorizer(let authorizer):
            return try await authorizer(request)
        case .endpoint(let url, let headers):
            var http = HTTPClientRequest(url: url)
            http.method = .POST
            http.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
            for (name, value) in headers { http.headers.add(name: name, value: value) }
            http.body = .bytes(ByteBuffer(string: request.formBody))
            return try await fetchAuth(http, channel: request.channelName)
        case .requestBuilder(let build):
            return try await fetchAuth(try await build(request), channel: request.channelName)
        }
    }

    private func fetchAuth(_ request: HTTPClientRequest, channel: String) async throws -> PusherChannelAuth {
        let response = try await httpClient.execute(request, timeout: .seconds(10))
        let body = try await response.body.collect(upTo: 64 * 1024)
        let text = String(buffer: body)
        guard response.status.code == 200 else {
            throw PusherError.authorizationFailed(
                channel: channel,
                message: "auth endpoint answered \(response.status.code): \(text.prefix(200))"
            )
        }
        return try PusherChannelAuth(json: text)
    }
}

/// A handle to a channel of a ``PusherClient`` (cheap to copy; the client holds the state).
public struct PusherChannel: Sendable {
    /// The channel name.
    public let name: String
    /// The client it belongs to.
    public let client: PusherClient

    /// The channel's kind by name prefix.
    public var kind: ChannelKind { ChannelName(name).kind }
    /// Whether the server confirmed the subscription on the current connection.
    public var isSubscribed: Bool { client.isSubscribed(name) }
    /// This channel's events, in arrival order.
    public func events() -> AsyncStream<PusherEvent> { client.events(channel: name) }
    /// Calls `callback` for events named `eventName` (all when `nil`) on this channel.
    @discardableResult
    public func bind(eventName: String? = nil, callback: @escaping @Sendable (PusherEvent) -> Void) -> String {
        client.bind(channel: name, eventName: eventName, callback: callback)
    }
    /// Removes a binding.
    public func unbind(_ callbackID: String) { client.unbind(callbackID) }
    /// Removes every binding of this channel.
    public func unbindAll() { client.unbindAll(channel: name) }
    /// Sends a client event on this channel.
    public func trigger(event: String, data: String) throws(PusherError) {
        try client.trigger(channel: name, event: event, data: data)
    }
    /// Unsubscribes.
    public func unsubscribe() { client.unsubscribe(name) }
}

/// A presence channel: a ``PusherChannel`` plus its members.
public struct PresenceChannel: Sendable {
    /// The underlying channel.
    public let channel: PusherChannel

    /// The channel name.
    public var name: String { channel.name }
    /// The current members (replaced on every `subscription_succeeded`).
    public var members: [PusherMember] { channel.client.members(of: channel.name) }
    /// Our own member entry.
    public var me: PusherMember? { channel.client.me(of: channel.name) }
    /// The member with `userID`, if present.
    public func findMember(userID: String) -> PusherMember? { members.first { $0.userID == userID } }
    /// Member list changes of this channel.
    public func presenceChanges() -> AsyncStream<PusherPresenceChange> { channel.client.presenceChanges(channel: name) }
    /// This channel's events.
    public func events() -> AsyncStream<PusherEvent> { channel.events() }
}
