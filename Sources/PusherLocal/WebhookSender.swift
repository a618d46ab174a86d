import AsyncHTTPClient
import Locking
import Logging
import NIOCore
import PusherProtocol

import struct FoundationEssentials.Date

/// Posts webhooks (docs/pusher-protocol.md §2, "Webhooks"): `{"time_ms","events":[…]}` with
/// `X-Pusher-Key` and `X-Pusher-Signature` = hex HMAC-SHA256(secret, body).
///
/// The I/O owner of one ``WebhookBatcher`` per app: events are queued without blocking the caller;
/// one task (``run()``) batches, posts and retries them, one request in flight per app, in order.
final class WebhookSender: Sendable {
    /// What the sender's task reacts to.
    enum Input: Sendable {
        case event(appID: String, PusherWebhookEvent)
        case timer(appID: String)
        case posted(appID: String, succeeded: Bool)
        case shutdown
    }

    let url: String
    let logger: Logger
    let apps: [String: PusherLocalApp]
    private let batchers: Locked<[String: WebhookBatcher]>
    private let stream: AsyncStream<Input>
    private let continuation: AsyncStream<Input>.Continuation

    init(url: String, apps: [PusherLocalApp], settings: WebhookSettings, logger: Logger) {
        self.url = url
        self.logger = logger
        self.apps = Dictionary(apps.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        self.batchers = Locked(
            Dictionary(apps.map { ($0.id, WebhookBatcher(settings: settings)) }, uniquingKeysWith: { first, _ in first }))
        (stream, continuation) = AsyncStream.makeStream(of: Input.self)
    }

    /// Queues one event.
    func post(_ event: PusherWebhookEvent, app: PusherLocalApp) {
        continuation.yield(.event(appID: app.id, event))
    }

    /// The counters of one app.
    func counters(appID: String) -> WebhookCounters {
        batchers.withLock { $0[appID]?.counters ?? WebhookCounters() }
    }

    /// Stops taking events; ``run()`` returns after one last attempt at what is queued.
    func finish() { continuation.yield(.shutdown) }

    /// The signed body and headers of one webhook request.
    static func request(events: [PusherWebhookEvent], app: PusherLocalApp, timeMillis: Int64) -> (body: String, signature: String) {
        let body = "{\"time_ms\":" + String(timeMillis) + ",\"events\":[" + events.map(\.json).joined(separator: ",") + "]}"
        return (body, hmacSHA256Hex(secret: app.secret, message: body))
    }

    /// Batches, posts and retries queued events until ``finish()`` (then drains) or cancellation.
    func run() async {
        await withDiscardingTaskGroup { group in
            var armed: [String: ContinuousClock.Instant] = [:]
            var draining = false
            inputs: for await input in stream {
                let now = ContinuousClock.now
                let appID: String
                var actions: [WebhookBatcher.Action] = []
                switch input {
                case .shutdown:
                    draining = true
                    for id in apps.keys.sorted() {
                        let drained = batchers.withLock { $0[id]?.drain(now: now) ?? [] }
                        carryOut(drained, appID: id, group: &group)
                        arm(id, armed: &armed, group: &group)
                    }
                    if isIdle { break inputs }
                    continue
                case .event(let id, let event):
                    appID = id
                    actions = batchers.withLock { $0[id]?.eventQueued(event, now: now) ?? [] }
                case .timer(let id):
                    appID = id
                    armed[id] = nil
                    actions = batchers.withLock { $0[id]?.timerFired(now: now) ?? [] }
                case .posted(let id, let succeeded):
                    appID = id
                    actions = batchers.withLock { batchers in
                        (succeeded ? batchers[id]?.postSucceeded(now: now) : batchers[id]?.postFailed(now: now)) ?? []
                    }
                }
                carryOut(actions, appID: appID, group: &group)
                arm(appID, armed: &armed, group: &group)
                if draining, isIdle { break inputs }
                if Task.isCancelled { break inputs }
            }
            group.cancelAll()
        }
    }

    private var isIdle: Bool { batchers.withLock { $0.values.allSatisfy(\.isIdle) } }

    /// Starts a timer task for the app's next deadline unless an earlier one is armed already.
    private func arm(_ appID: String, armed: inout [String: ContinuousClock.Instant], group: inout DiscardingTaskGroup) {
        guard let deadline = batchers.withLock({ $0[appID]?.nextDeadline }) else { return }
        if let current = armed[appID], current <= deadline { return }
        armed[appID] = deadline
        let continuation = self.continuation
        group.addTask {
            do {
                try await Task.sleep(until: deadline, clock: .continuous)
                continuation.yield(.timer(appID: appID))
            } catch {
                return  // cancelled at shutdown
            }
        }
    }

    private func carryOut(_ actions: [WebhookBatcher.Action], appID: String, group: inout DiscardingTaskGroup) {
        guard let app = apps[appID] else { return }
        for action in actions {
            switch action {
            case .post(let events):
                let continuation = self.continuation
                group.addTask {
                    let succeeded = await self.send(events, app: app)
                    continuation.yield(.posted(appID: appID, succeeded: succeeded))
                }
            case .gaveUp(let events, let attempts):
                logger.warning(
                    "Webhook request given up",
                    metadata: [
                        "pusher.app": "\(appID)", "webhook.events": "\(events.count)", "webhook.attempts": "\(attempts)",
                        "webhook.url": "\(url)",
                    ])
            case .dropped(let count):
                logger.warning("Webhook queue full: events dropped", metadata: ["pusher.app": "\(appID)", "webhook.events": "\(count)"])
            }
        }
    }

    /// One attempt: true when the receiver answered 2xx.
    private func send(_ events: [PusherWebhookEvent], app: PusherLocalApp) async -> Bool {
        let millis = Int64(Date().timeIntervalSince1970 * 1000)
        let (body, signature) = Self.request(events: events, app: app, timeMillis: millis)
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "X-Pusher-Key", value: app.key)
        request.headers.add(name: "X-Pusher-Signature", value: signature)
        request.body = .bytes(ByteBuffer(string: body))
        do {
            let response = try await HTTPClient.shared.execute(request, timeout: .seconds(5))
            _ = try? await response.body.collect(upTo: 64 * 1024)
            guard (200..<300).contains(Int(response.status.code)) else {
                logger.warning(
                    "Webhook refused",
                    metadata: ["http.status": "\(response.status.code)", "webhook.url": "\(url)", "pusher.app": "\(app.id)"])
                return false
            }
            return true
        } catch {
            logger.warning("Webhook post failed", metadata: ["error": "\(error)", "webhook.url": "\(url)", "pusher.app": "\(app.id)"])
            return false
        }
    }
}
