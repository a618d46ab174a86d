/// How webhooks are batched and retried (`--webhook-batch-size`, `--webhook-batch-ms`,
/// `--webhook-retry-initial-ms`, `--webhook-retry-cap-ms`, `--webhook-retry-max`).
public struct WebhookSettings: Sendable, Equatable {
    /// Most events in one request (hosted Pusher: batches of events; default 20).
    public var batchSize: Int
    /// Longest time an event waits for companions before its request goes out (default 250 ms).
    public var batchDelay: Duration
    /// Wait before the first retry of a failed request; doubled after each failure (default 1 s).
    public var retryInitial: Duration
    /// Longest wait between two attempts (default 60 s).
    public var retryCap: Duration
    /// A request is not attempted again later than this after its first attempt; then it is
    /// dropped, logged and counted (default 5 minutes; zero: never retried).
    public var retryLimit: Duration
    /// Most events waiting per app behind a retrying request; newer ones are dropped and counted.
    public var maxQueuedEvents: Int

    /// Settings from their parts; the defaults are those named above.
    public init(
        batchSize: Int = 20,
        batchDelay: Duration = .milliseconds(250),
        retryInitial: Duration = .seconds(1),
        retryCap: Duration = .seconds(60),
        retryLimit: Duration = .seconds(300),
        maxQueuedEvents: Int = 100_000
    ) {
        self.batchSize = batchSize
        self.batchDelay = batchDelay
        self.retryInitial = retryInitial
        self.retryCap = retryCap
        self.retryLimit = retryLimit
        self.maxQueuedEvents = maxQueuedEvents
    }

    /// Problems that make these settings unusable, one message each (empty when valid).
    public var problems: [String] {
        var problems: [String] = []
        if !(1...1000).contains(batchSize) { problems.append("webhook batch size must be 1...1000, got \(batchSize)") }
        if batchDelay < .zero || batchDelay > .seconds(60) { problems.append("webhook batch delay must be 0...60000 ms") }
        if retryInitial < .milliseconds(1) { problems.append("webhook retry initial delay must be at least 1 ms") }
        if retryCap < retryInitial { problems.append("webhook retry cap must not be below the initial retry delay") }
        if retryLimit < .zero { problems.append("webhook retry limit must not be negative") }
        if maxQueuedEvents < 1 { problems.append("webhook queue must hold at least 1 event") }
        return problems
    }
}

/// Webhook counters of one app (control endpoint `GET /pusher-local/apps/ID/stats`).
public struct WebhookCounters: Sendable, Equatable {
    /// Requests the receiver answered with 2xx.
    public var posted = 0
    /// Events in those requests.
    public var eventsPosted = 0
    /// Attempts that failed (network error or non-2xx).
    public var failed = 0
    /// Attempts that repeated a failed request.
    public var retried = 0
    /// Requests dropped after failing until the retry limit.
    public var givenUp = 0
    /// Events in those requests.
    public var eventsGivenUp = 0
    /// Events dropped because the queue behind a retrying request was full.
    public var eventsDropped = 0

    /// Counters from their parts (all zero by default).
    public init() {}
}

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
        case post([WebhookEvent])
        /// This request failed until the retry limit and is dropped (log it).
        case gaveUp([WebhookEvent], attempts: Int)
        /// The queue was full; this many new events were dropped (log it).
        case dropped(Int)
    }

    /// A request that has been attempted at least once.
    struct Request {
        var events: [WebhookEvent]
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

    var waiting: [(event: WebhookEvent, since: ContinuousClock.Instant)] = []
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
    public mutating func eventQueued(_ event: WebhookEvent, now: ContinuousClock.Instant) -> [Action] {
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
