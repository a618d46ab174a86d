import Locking
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

/// A lean HTTP/1.1 keep-alive client for the Pusher HTTP API (issue 16): the MQTT → Pusher hot
/// path sends one `POST /apps/ID/batch_events` after another, and a general-purpose client's
/// per-request machinery cost more CPU than the bridge's own work.
///
/// Connections are kept alive and reused per ``PusherHTTPEndpoint``; at most
/// ``maximumConnectionsPerHost`` are open per endpoint, and requests beyond that wait, first come
/// first served, for a free one. A connection idle for ``idleTimeout`` is closed, and so is one
/// whose server answered `Connection: close` or HTTP/1.0; one the server closed while idle is never
/// handed out again. State sits behind one lock: taking and returning a connection is two short
/// critical sections, no actor hop. Each request is written (head and body) in one flush; NIOHTTP1
/// parses the response (`HTTPExchangeHandler`).
public final class PusherHTTPConnectionPool: Sendable {
    /// The process-wide pool: up to 64 connections per host, so that each of a bridge's `api_lanes`
    /// (1…64) requests in flight has a connection of its own. A static is never deinitialised, so it
    /// needs no shutdown.
    public static let shared = PusherHTTPConnectionPool(maximumConnectionsPerHost: 64)

    /// The default largest response body accepted (16 MiB); a larger one fails the request and
    /// closes the connection. A channel query answers with every occupied channel at once (the HTTP
    /// API has no pages): 100,000 channels with `subscription_count` are about 6 MB; 1 MiB stopped
    /// discovery at about 17,000 (Benchmarks/fleet/bench_fleet.py at 100,000 channels).
    public static let maximumBodyBytes = 16 << 20

    /// At most this many connections are open (or opening) per endpoint.
    public let maximumConnectionsPerHost: Int
    /// The largest response body this pool accepts.
    public let maximumBodyBytes: Int
    /// An idle connection is closed after this long.
    public let idleTimeout: Duration
    private let eventLoopGroup: any EventLoopGroup
    private let hosts = Locked<[PusherHTTPEndpoint: HostConnections]>([:])
    /// One TLS context per CA file ("" for the system roots), built on first use, not per request.
    private let tlsContexts = Locked<[String: NIOSSLContext]>([:])

    /// What a request gets from the pool.
    private enum Lease: Sendable {
        /// An open keep-alive connection to reuse.
        case reuse(any Channel)
        /// A free slot: open a new connection (already counted as open).
        case connect
        /// The request's deadline passed while it waited for a connection.
        case timedOut
        /// The request's task was cancelled while it waited for a connection.
        case cancelled
    }

    /// One endpoint's connections.
    private struct HostConnections: Sendable {
        /// Open connections waiting for a request, the most recently used last.
        var idle: [any Channel] = []
        /// Connections open or being opened (idle and busy).
        var open = 0
        /// Requests waiting for a connection, first come first served.
        var waiters = WaiterQueue<Lease>()
    }

    /// A pool; connections run on `eventLoopGroup`.
    ///
    /// - Parameters:
    ///   - maximumConnectionsPerHost: connections open at once per endpoint (at least 1).
    ///   - idleTimeout: an unused connection is closed after this long (default 60 s).
    ///   - eventLoopGroup: where the connections run (default NIO's shared group).
    ///   - maximumBodyBytes: the largest response body accepted (default 16 MiB, at least 1).
    public init(
        maximumConnectionsPerHost: Int,
        idleTimeout: Duration = .seconds(60),
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        maximumBodyBytes: Int = PusherHTTPConnectionPool.maximumBodyBytes
    ) {
        self.maximumConnectionsPerHost = max(1, maximumConnectionsPerHost)
        self.maximumBodyBytes = max(1, maximumBodyBytes)
        self.idleTimeout = idleTimeout
        self.eventLoopGroup = eventLoopGroup
    }

    /// Sends `request` to `endpoint` and returns the whole response, whatever its status.
    ///
    /// `timeout` bounds everything: waiting for a connection, connecting, the TLS handshake and the
    /// response; when it passes, the connection is closed and the request fails.
    /// - Throws: ``PusherHTTPError/network(_:)`` with what went wrong in an operator's words.
    public func execute(
        _ request: PusherHTTPRequest, to endpoint: PusherHTTPEndpoint, timeout: Duration
    ) async throws(PusherHTTPError) -> PusherHTTPResponse {
        let deadline = NIODeadline.now() + .nanoseconds(timeout.nanosecondsClamped)
        do {
            return try await execute(request, to: endpoint, deadline: deadline, timeoutText: timeout.shortText)
        } catch {
            throw .network(error.message)
        }
    }

    /// Closes the idle connections and waits until they are closed; busy ones close when their
    /// request ends if the server asks so, or when idle for ``idleTimeout``. The pool stays usable.
    public func shutdown() async {
        let idle = hosts.withLock { hosts in
            var idle: [any Channel] = []
            for key in hosts.keys {
                idle += hosts[key]?.idle ?? []
                hosts[key]?.idle = []
            }
            return idle
        }
        for channel in idle {
            channel.close(promise: nil)
            try? await channel.closeFuture.get()
        }
    }

    // MARK: one request

    private func execute(
        _ request: PusherHTTPRequest, to endpoint: PusherHTTPEndpoint, deadline: NIODeadline, timeoutText: String
    ) async throws(HTTPExchangeFailure) -> PusherHTTPResponse {
        let (channel, reused) = try await connection(to: endpoint, preferNew: false, deadline: deadline, timeoutText: timeoutText)
        do {
            return try await exchange(request, on: channel, endpoint: endpoint, deadline: deadline, timeoutText: timeoutText)
        } catch let error where error.peerClosedBeforeAnswer && reused {
            // The keep-alive race: the server closed this idle connection (its idle timeout) just as
            // the request went out, so it failed before any byte of an answer and was never acted on.
            // Retried once, on a new connection when the endpoint has room for one.
            let (fresh, _) = try await connection(to: endpoint, preferNew: true, deadline: deadline, timeoutText: timeoutText)
            return try await exchange(request, on: fresh, endpoint: endpoint, deadline: deadline, timeoutText: timeoutText)
        }
    }

    private func exchange(
        _ request: PusherHTTPRequest, on channel: any Channel, endpoint: PusherHTTPEndpoint, deadline: NIODeadline,
        timeoutText: String
    ) async throws(HTTPExchangeFailure) -> PusherHTTPResponse {
        var headers = request.headers
        headers.add(name: "Host", value: endpoint.hostHeader)
        var body: ByteBuffer?
        if let text = request.body {
            // The String's UTF-8 straight into the buffer: no intermediate array.
            let buffer = channel.allocator.buffer(string: text)
            if !headers.contains(name: "Content-Type") { headers.add(name: "Content-Type", value: "application/json") }
            headers.add(name: "Content-Length", value: String(buffer.readableBytes))
            body = buffer
        } else if request.method == .POST || request.method == .PUT {
            headers.add(name: "Content-Length", value: "0")
        }
        let promise = channel.eventLoop.makePromise(of: PusherHTTPResponse.self)
        let exchange = HTTPExchange(
            head: HTTPRequestHead(version: .http1_1, method: request.method, uri: request.target, headers: headers),
            body: body, deadline: deadline, timeoutText: timeoutText, promise: promise)
        // The handler completes the promise; this covers a request that never reached it (the
        // connection closed and its pipeline was torn down first). A second completion is ignored.
        channel.writeAndFlush(exchange).whenFailure { _ in promise.fail(HTTPExchangeFailure.closedBeforeAnswer) }
        let response: PusherHTTPResponse
        do {
            // A cancelled task (the bridge stopping) does not wait for the deadline: the connection
            // closes, which ends the exchange; the handler's own completion is then ignored.
            response = try await withTaskCancellationHandler {
                try await promise.futureResult.get()
            } onCancel: {
                promise.fail(HTTPExchangeFailure("the request was cancelled"))
                channel.close(promise: nil)
            }
        } catch let failure as HTTPExchangeFailure {
            throw failure
        } catch {
            throw HTTPExchangeFailure("connection to \(endpoint) failed: \(error)")
        }
        release(channel, to: endpoint)
        return response
    }

    // MARK: connections

    /// An open connection to `endpoint` and whether it served a request before. `preferNew` (the
    /// retry) opens a new one when the endpoint has room, instead of taking an idle one.
    private func connection(
        to endpoint: PusherHTTPEndpoint, preferNew: Bool, deadline: NIODeadline, timeoutText: String
    ) async throws(HTTPExchangeFailure) -> (any Channel, reused: Bool) {
        var lease = hosts.withLock { take(from: &$0[endpoint, default: HostConnections()], preferNew: preferNew) }
        if lease == nil {
            // Taken again under the same lock as the parking: a connection freed since the first
            // look is not missed. The deadline and a cancellation take the request out of the queue.
            let waitDeadline = ContinuousClock.now + .nanoseconds((deadline - .now()).nanoseconds)
            lease = await hosts.wait(
                in: { hosts, body in body(&hosts[endpoint, default: HostConnections()].waiters) },
                deadline: waitDeadline,
                until: { take(from: &$0[endpoint, default: HostConnections()], preferNew: preferNew) },
                ifTimedOut: { _ in .timedOut },
                ifCancelled: { _ in .cancelled })
        }
        switch lease {
        case .reuse(let channel):
            return (channel, true)
        case .connect:
            return (try await connect(to: endpoint, deadline: deadline, timeoutText: timeoutText), false)
        case .timedOut, nil:
            throw HTTPExchangeFailure("no connection to \(endpoint) free within \(timeoutText)")
        case .cancelled:
            throw HTTPExchangeFailure("the request was cancelled")
        }
    }

    /// The first look (under the lock): an active idle connection, else a slot if there is room.
    private func take(from host: inout HostConnections, preferNew: Bool) -> Lease? {
        if preferNew, host.open < maximumConnectionsPerHost {
            host.open += 1
            return .connect
        }
        while let channel = host.idle.popLast() {
            // One the server closed is dropped here; its `closeFuture` does the counting.
            if channel.isActive { return .reuse(channel) }
        }
        guard host.open < maximumConnectionsPerHost else { return nil }
        host.open += 1
        return .connect
    }

    /// Returns a connection after a complete response: to the first waiter, else to the idle list.
    private func release(_ channel: any Channel, to endpoint: PusherHTTPEndpoint) {
        guard channel.isActive else { return }  // Closed (`Connection: close`): `closeFuture` counts it.
        hosts.withLock { hosts in
            let waiter = hosts[endpoint, default: HostConnections()].waiters.resumeFirst(returning: .reuse(channel))
            if waiter.count == 0 { hosts[endpoint, default: HostConnections()].idle.append(channel) }
            return waiter
        }.resume()
    }

    /// A connection closed, or could not be opened: its slot goes to the first waiter, if any.
    private func slotFreed(_ endpoint: PusherHTTPEndpoint, channel: (any Channel)?) {
        hosts.withLock { hosts in
            if let channel { hosts[endpoint]?.idle.removeAll { $0 === channel } }
            // The first waiter inherits the slot.
            let waiter = hosts[endpoint]?.waiters.resumeFirst(returning: .connect) ?? WakeUp()
            if waiter.count == 0 { hosts[endpoint]?.open -= 1 }
            return waiter
        }.resume()
    }

    /// Opens a connection (TCP, then TLS when secure) in a slot already counted as open; returns it
    /// once it can take a request, so a TLS failure is reported as such, never as a closed connection.
    private func connect(
        to endpoint: PusherHTTPEndpoint, deadline: NIODeadline, timeoutText: String
    ) async throws(HTTPExchangeFailure) -> any Channel {
        let loop = eventLoopGroup.next()
        let ready = loop.makePromise(of: Void.self)
        let channel: any Channel
        do {
            let tlsContext = try endpoint.secure ? tlsContext(caFile: endpoint.caFile) : nil
            let setup = HTTPExchangeHandlerSetup(
                endpoint: endpoint, tlsContext: tlsContext, idleTimeout: .nanoseconds(idleTimeout.nanosecondsClamped),
                maximumBodyBytes: maximumBodyBytes, ready: ready)
            let remaining = max(deadline - .now(), .milliseconds(1))
            channel = try await ClientBootstrap(group: loop)
                .connectTimeout(remaining)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture { try setup.install(on: channel) }
                }
                .connect(host: endpoint.host, port: endpoint.port)
                .get()
        } catch {
            let failure = HTTPExchangeHandlerSetup.connectFailure(error, endpoint: endpoint, timeoutText: timeoutText)
            ready.fail(failure)
            slotFreed(endpoint, channel: nil)
            throw failure
        }
        channel.closeFuture.whenComplete { [self] _ in slotFreed(endpoint, channel: channel) }
        let handshakeTimer = loop.scheduleTask(deadline: deadline) {
            ready.fail(HTTPExchangeFailure("no TLS handshake with \(endpoint.host) within \(timeoutText)"))
        }
        do {
            try await ready.futureResult.get()
            handshakeTimer.cancel()
        } catch {
            handshakeTimer.cancel()
            channel.close(promise: nil)
            throw error as? HTTPExchangeFailure ?? HTTPExchangeFailure("could not connect to \(endpoint): \(error)")
        }
        return channel
    }

    /// The TLS context for `caFile` (system roots for `nil`), built once per pool.
    private func tlsContext(caFile: String?) throws(HTTPExchangeFailure) -> NIOSSLContext {
        let key = caFile ?? ""
        if let context = tlsContexts.withLock({ $0[key] }) { return context }
        var configuration = TLSConfiguration.makeClientConfiguration()
        if let caFile { configuration.trustRoots = .file(caFile) }
        let context: NIOSSLContext
        do {
            context = try NIOSSLContext(configuration: configuration)
        } catch {
            throw HTTPExchangeFailure("TLS set-up failed (CA file \(caFile ?? "none")): \(error)")
        }
        return tlsContexts.withLock { contexts in
            if let existing = contexts[key] { return existing }
            contexts[key] = context
            return context
        }
    }
}
