import Hummingbird
import Logging
import NIOCore
import PusherProtocol

import struct FoundationEssentials.Date

/// Development-only test and fault control under `/pusher-local/...` (not part of Pusher's API;
/// unauthenticated; turned off with `--no-control`). See the README of pusher-local.
///
/// | request | effect |
/// |---|---|
/// | `GET  /pusher-local/health` | `ok` |
/// | `GET  /pusher-local/apps/ID/stats` | counters as JSON |
/// | `GET  /pusher-local/apps/ID/connections` | every open connection: socket id, channels, presence user id, `ip:port` |
/// | `POST /pusher-local/apps/ID/disconnect?code=4200&reason=R` | close every connection with the code |
/// | `POST /pusher-local/apps/ID/disconnect?socket_id=S&code=4200` | close the one connection with that socket id (404 if none) |
/// | `POST /pusher-local/apps/ID/raw` (body = frame) | send the body as one raw text frame to every connection |
/// | `POST /pusher-local/apps/ID/pings?answer=false` | stop (or with `true` resume) answering `pusher:ping` |
/// | `POST /pusher-local/apps/ID/refuse?code=4001` | accept-then-close every new connection with the code |
/// | `POST /pusher-local/apps/ID/accept` | accept new connections again |
/// | `POST /pusher-local/apps/ID/stream?channel=C&event=E&count=N&size=S&rate=R` | publish a generated stream |
/// | `POST /pusher-local/apps/ID/quota?exceeded=true` | refuse `events` and `batch_events` with 403 `Over quota` (`false` ends it) |
struct ControlEndpoints {
    let registry: AppRegistry
    let logger: Logger

    func respond(_ method: HTTPRequest.Method, segments: [String], query: [(String, String)], body: [UInt8]) async throws -> Response {
        func param(_ name: String) -> String? { query.first { $0.0 == name }?.1 }
        if segments == ["health"] { return HTTPAPIResponder.text(200, "ok") }
        guard segments.count == 3, segments[0] == "apps" else { throw APIError(status: 404, message: "Unknown control endpoint") }
        guard let live = registry.byID[segments[1]] else { throw APIError(status: 404, message: "Unknown app id \(segments[1])") }
        let control = AppControl(live: live)
        switch (method, segments[2]) {
        case (.get, "stats"):
            return HTTPAPIResponder.json(live.stats().json)
        case (.get, "connections"):
            return HTTPAPIResponder.json(ConnectionRecord.json(live.state.withLock { $0.hub.connectionRecords }))
        case (.post, "disconnect"):
            let code = try Self.closeCode(param("code") ?? "4200")
            let reason = param("reason") ?? "closed by pusher-local control"
            if let socketID = param("socket_id") {
                guard control.disconnect(socketID: socketID, code: code, reason: reason) else {
                    throw APIError(status: 404, message: "No open connection with socket_id \(socketID)")
                }
                logger.info(
                    "Control: disconnect one",
                    metadata: ["pusher.app": "\(live.app.id)", "pusher.close_code": "\(code)", "pusher.socket_id": "\(socketID)"])
                return HTTPAPIResponder.json("{\"closed\":1}")
            }
            let count = control.disconnectAll(code: code, reason: reason)
            logger.info(
                "Control: disconnect",
                metadata: ["pusher.app": "\(live.app.id)", "pusher.close_code": "\(code)", "connections": "\(count)"])
            return HTTPAPIResponder.json("{\"closed\":\(count)}")
        case (.post, "raw"):
            let count = control.sendRaw(body)
            return HTTPAPIResponder.json("{\"sent\":\(count)}")
        case (.post, "pings"):
            guard let answer = param("answer"), answer == "true" || answer == "false" else {
                throw APIError.badRequest("answer=true or answer=false needed")
            }
            live.state.withLock { $0.faults.answerPings = answer == "true" }
            logger.info("Control: answer pings", metadata: ["pusher.app": "\(live.app.id)", "answer": "\(answer)"])
            return HTTPAPIResponder.json("{\"answer_pings\":\(answer)}")
        case (.post, "refuse"):
            let code = try Self.closeCode(param("code") ?? "4001")
            let reason = param("reason") ?? "refused by pusher-local control"
            live.state.withLock { $0.faults.refusal = (code, reason) }
            logger.info("Control: refuse connections", metadata: ["pusher.app": "\(live.app.id)", "pusher.close_code": "\(code)"])
            return HTTPAPIResponder.json("{\"refuse\":\(code)}")
        case (.post, "accept"):
            live.state.withLock { $0.faults.refusal = nil }
            return HTTPAPIResponder.json("{\"refuse\":null}")
        case (.post, "quota"):
            guard let exceeded = param("exceeded"), exceeded == "true" || exceeded == "false" else {
                throw APIError.badRequest("exceeded=true or exceeded=false needed")
            }
            control.setQuotaExceeded(exceeded == "true")
            logger.info("Control: quota", metadata: ["pusher.app": "\(live.app.id)", "exceeded": "\(exceeded)"])
            return HTTPAPIResponder.json("{\"quota_exceeded\":\(exceeded)}")
        case (.post, "stream"):
            let spec = try StreamSpec(
                channel: param("channel"), event: param("event"), count: param("count"), size: param("size"), rate: param("rate"))
            let result = await spec.run(on: live)
            return HTTPAPIResponder.json(result)
        default:
            throw APIError(status: 404, message: "Unknown control endpoint \(method.rawValue) \(segments[2])")
        }
    }

    static func closeCode(_ text: String) throws(APIError) -> UInt16 {
        guard let code = UInt16(text), (1000...4999).contains(code) else {
            throw APIError.badRequest("code must be a WebSocket close code 1000...4999, got '\(text)'")
        }
        return code
    }
}

/// The control operations on one app, shared by the HTTP endpoints and ``RunningPusherLocal``.
struct AppControl {
    let live: LiveApp

    func disconnectAll(code: UInt16, reason: String) -> Int {
        live.perform { state in
            let actions = state.hub.closeAll(code: code, reason: reason)
            return (actions.count, actions)
        }
    }

    /// Closes the connection with Pusher socket id `socketID`; false when none is open.
    func disconnect(socketID: String, code: UInt16, reason: String) -> Bool {
        live.perform { state in
            guard let actions = state.hub.close(socketID: socketID, code: code, reason: reason) else { return (false, []) }
            return (true, actions)
        }
    }

    /// While `exceeded`, HTTP API publishes are refused with 403 (``APIError/overQuota``).
    func setQuotaExceeded(_ exceeded: Bool) {
        live.state.withLock { $0.faults.quotaExceeded = exceeded }
    }

    /// The bytes go out as they are (a text frame that may be invalid UTF-8), bypassing the hub.
    func sendRaw(_ bytes: [UInt8]) -> Int {
        let outboxes = live.state.withLock { state in Array(state.outboxes.values) }
        let buffer = ByteBuffer(bytes: bytes)
        for outbox in outboxes { outbox.send(.text(buffer)) }
        return outboxes.count
    }
}

/// A generated event stream for benchmarks: `count` events named `event` on `channel`, each
/// `{"seq":i,"sent_at_ns":T,"pad":"…"}` padded to about `size` bytes of data, at `rate` events
/// per second (0 = as fast as possible). `sent_at_ns` is wall-clock nanoseconds since 1970, so a
/// receiver on the same machine can compute latency.
struct StreamSpec: Sendable {
    var channel: String
    var event: String
    var count: Int
    var size: Int
    var rate: Double

    init(channel: String?, event: String?, count: String?, size: String?, rate: String?) throws(APIError) {
        guard let channel, ChannelName.problem(with: channel) == nil else {
            throw APIError.badRequest("channel= a valid channel name is needed")
        }
        self.channel = channel
        self.event = event ?? "bench"
        if let problem = EventName.problem(with: self.event) { throw APIError.badRequest("event: \(problem)") }
        guard let count = Int(count ?? "1000"), (1...100_000_000).contains(count) else {
            throw APIError.badRequest("count must be 1...100000000")
        }
        guard let size = Int(size ?? "100"), (0...PusherLimits.eventDataBytes).contains(size) else {
            throw APIError.badRequest("size must be 0...\(PusherLimits.eventDataBytes)")
        }
        guard let rate = Double(rate ?? "0"), rate >= 0, rate.isFinite else { throw APIError.badRequest("rate must be a number >= 0") }
        self.count = count
        self.size = size
        self.rate = rate
    }

    /// The data of event `seq`; `padding` is a run of `x` long enough for `size` (made once per
    /// stream, so the generator's cost per event stays small).
    static func data(seq: Int, sentAtNanos: Int64, size: Int, padding: Substring) -> String {
        let head = "{\"seq\":\(seq),\"sent_at_ns\":\(sentAtNanos),\"pad\":\""
        let length = max(0, size - head.utf8.count - 2)
        return head + padding.prefix(length) + "\"}"
    }

    func run(on live: LiveApp) async -> String {
        let clock = ContinuousClock()
        let start = clock.now
        var sent = 0
        let padding = Substring(String(repeating: "x", count: size))
        for seq in 0..<count {
            if Task.isCancelled { break }
            if rate > 0 {
                let due = start + .nanoseconds(Int64(Double(seq) / rate * 1e9))
                if due > clock.now { try? await Task.sleep(until: due, clock: clock) }
            }
            let nanos = Int64(Date().timeIntervalSince1970 * 1e9)
            let request = PublishRequest(
                name: event, data: Self.data(seq: seq, sentAtNanos: nanos, size: size, padding: padding), channels: [channel])
            let now = clock.now
            live.perform { state in ((), state.hub.publish(request, now: now)) }
            sent += 1
        }
        let elapsed = (clock.now - start).components
        let seconds = Double(elapsed.seconds) + Double(elapsed.attoseconds) / 1e18
        let perSecond = seconds > 0 ? Double(sent) / seconds : 0
        return "{\"sent\":\(sent),\"seconds\":\(seconds),\"events_per_second\":\(Int(perSecond))}"
    }
}

extension RunningPusherLocal {
    /// Every open connection of the app with its channels (the connections endpoint).
    public func connections(appID: String? = nil) -> [ConnectionRecord] {
        live(appID)?.state.withLock { $0.hub.connectionRecords } ?? []
    }

    /// While `exceeded`, the app's HTTP API refuses `events` and `batch_events` with 403
    /// `Over quota` (403 is hosted Pusher's status for an app over its message quota).
    public func setQuotaExceeded(appID: String? = nil, _ exceeded: Bool) {
        guard let live = live(appID) else { return }
        AppControl(live: live).setQuotaExceeded(exceeded)
    }
}
