import PusherProtocol

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
