import PusherProtocol

/// The webhook queue of one app: batches events (at most ``WebhookSettings/batchSize`` per
/// request, none waiting longer than ``WebhookSettings/batchDelay``), keeps one request in
/// flight, and retries a failed one with exponential backoff until ``WebhookSettings/retryLimit``
/// after its first attempt. Later events wait behind it, so the receiver sees them in order.
///
/// A pure state machine: the I/O owner (`WebhookSender`) posts what ``Action/post(_:)`` says,
/// reports the outcome, and calls ``timerFired(now:)`` at ``nextDeadline``.
public struct WebhookBatcher: Sendable {
    /// What the I/O owner must do.
    public enum Action: Sendable, Equatable {
        /// Post these events as one request (a first attempt or a retry), then report the outcome.
        case post([PusherWebhookEvent])
        /// This request failed until the retry limit and is dropped (log it).
        case gaveUp([PusherWebhookEvent], attempts: Int)
        /// The queue was full; this many new events were dropped (log it).
        case dropped(Int)
    }

    /// A request that has been attempted at least once.
    struct Request {
        var events: [PusherWebhookEvent]
        var firstAttempt: ContinuousClock.Instant
        var attempts: Int
        var retryAt: ContinuousClock.Instant?
    }

    /// The settings in force.
    public let settings: WebhookSettings
    /// Counters since start.
    public private(set) var counters = WebhookCounters()
    /// Whether the server is shutting down: waiting events go out at once and failures are final.
    public private(set) var draining = false

    var waiting: [(event: PusherWebhookEvent, since: ContinuousClock.Instant)] = []
    var current: Request?
    var inFlight = false

    /// An empty queue.
    public init(settings: WebhookSettings = WebhookSettings()) {
        self.settings = settings
    }

    /// Events queued and not yet posted successfully (waiting, or in the current request).
    public var backlog: Int { waiting.count + (current?.events.count ?? 0) }

    /// Whether nothing is queued, in flight or waiting for a retry.
    public var isIdle: Bool { waiting.isEmpty && current == nil }

    /// When ``timerFired(now:)`` should be called next; nil when nothing waits for time.
    public var nextDeadline: ContinuousClock.Instant? {
        if inFlight { return nil }
        if let current { return current.retryAt }
        guard let oldest = waiting.first?.since else { return nil }
        if draining || waiting.count >= settings.batchSize { return oldest }
        return oldest + settings.batchDelay
    }

    /// The hub produced an event for this app.
    public mutating func eventQueued(_ event: PusherWebhookEvent, now: ContinuousClock.Instant) -> [Action] {
        if backlog >= settings.maxQueuedEvents {
            counters.eventsDropped += 1
            return [.dropped(1)]
        }
        waiting.append((event, now))
        return next(now: now)
    }

    /// A deadline from ``nextDeadline`` passed (early or repeated calls are harmless).
    public mutating func timerFired(now: ContinuousClock.Instant) -> [Action] { next(now: now) }

    /// The receiver answered the current request with 2xx.
    public mutating func postSucceeded(now: ContinuousClock.Instant) -> [Action] {
        guard inFlight, let request = current else { return [] }
        counters.posted += 1
        counters.eventsPosted += request.events.count
        current = nil
        inFlight = false
        return next(now: now)
    }

    /// The current request failed (network error or non-2xx): schedule a retry after
    /// retryInitial × 2^(failures − 1) (at most retryCap), or give it up when that retry would
    /// start later than retryLimit after the first attempt.
    public mutating func postFailed(now: ContinuousClock.Instant) -> [Action] {
        guard inFlight, var request = current else { return [] }
        counters.failed += 1
        inFlight = false
        let retryAt = now + Self.backoff(failures: request.attempts, settings: settings)
        if draining || retryAt - request.firstAttempt > settings.retryLimit {
            counters.givenUp += 1
            counters.eventsGivenUp += request.events.count
            current = nil
            return [.gaveUp(request.events, attempts: request.attempts)] + next(now: now)
        }
        request.retryAt = retryAt
        current = request
        return []
    }

    /// The server is stopping: post what waits at once, and do not retry failures.
    public mutating func drain(now: ContinuousClock.Instant) -> [Action] {
        draining = true
        if !inFlight, let request = current {
            counters.givenUp += 1
            counters.eventsGivenUp += request.events.count
            current = nil
            return [.gaveUp(request.events, attempts: request.attempts)] + next(now: now)
        }
        return next(now: now)
    }

    /// The wait after `failures` failed attempts: initial × 2^(failures − 1), capped.
    static func backoff(failures: Int, settings: WebhookSettings) -> Duration {
        var delay = settings.retryInitial
        var doublings = max(0, failures - 1)
        while doublings > 0, delay < settings.retryCap {
            delay *= 2
            doublings -= 1
        }
        return min(delay, settings.retryCap)
    }

    /// Starts the next attempt when nothing is in flight and one is due.
    mutating func next(now: ContinuousClock.Instant) -> [Action] {
        guard !inFlight else { return [] }
        if var request = current {
            guard let retryAt = request.retryAt, now >= retryAt else { return [] }
            request.attempts += 1
            request.retryAt = nil
            current = request
            inFlight = true
            counters.retried += 1
            return [.post(request.events)]
        }
        guard let deadline = nextDeadline, now >= deadline else { return [] }
        let count = min(settings.batchSize, waiting.count)
        let events = waiting.prefix(count).map(\.event)
        waiting.removeFirst(count)
        current = Request(events: events, firstAttempt: now, attempts: 1, retryAt: nil)
        inFlight = true
        return [.post(events)]
    }
}
