import Backoff

/// How one attempt to hand a batch of events to Pusher ended, as the I/O owner saw it.
public enum PusherBatchAttempt: Sendable, Equatable {
    /// Pusher accepted the batch (HTTP 200), or every client event was sent.
    case accepted
    /// No answer: connection refused or reset, timeout, TLS failure.
    case networkError(String)
    /// Pusher answered with this status (not 200).
    case status(Int, body: String)
    /// The request could not be made or its answer not read (too large, not signable, garbled
    /// reply; `status` 0 when there was none): sending it again cannot help.
    case unsendable(status: Int, body: String)
    /// A client event could not be sent on the WebSocket (not connected, not subscribed yet).
    case clientEventFailed(String)
}

/// What to do with a batch after an attempt.
public enum PusherBatchDecision: Sendable, Equatable {
    /// Acknowledge every event and count it delivered.
    case delivered
    /// Acknowledge every event and dead-letter it with this reason: Pusher refused it for good.
    case deadLetter(DeadLetterReason)
    /// Send the same batch again after `delay` (the `attempt`th retry, from 1).
    case retry(after: Duration, attempt: Int, reason: String)
    /// Pusher refused the app itself (HTTP 403: over quota, app disabled; docs/contract.md §7.3):
    /// MQTT → Pusher pauses — keep the batch and everything behind it (buffered, spooled), report
    /// the bridge not ready with `reason`, and send the same batch again after `delay` (the backoff's cap).
    case pause(after: Duration, reason: String)
    /// The bridge is stopping: leave the batch in the backlog (spooled) for the next start.
    case keepForNextStart(reason: String)
}

/// The retry and dead-letter decisions of MQTT → Pusher delivery, for one batch at a time.
///
/// Network errors, 5xx and 429 are retried with the bridge's reconnect backoff (a restart of
/// Pusher or a rate limit passes). A 403 (the app is over quota or disabled) pauses delivery: the
/// same batch is tried again at the backoff's cap until Pusher takes it (docs/contract.md §7.3).
/// Other 4xx are final and dead-lettered, as is a request that cannot be made. While the bridge
/// stops, a failing batch is kept for the next start instead of being retried.
///
/// Pure value type; the jitter of the delay is passed in (`unitRandom`), never drawn.
public struct PusherBatchDelivery: Sendable {
    /// Backoff for retries (the bridge's `[bridge.reconnect]`).
    public let policy: ReconnectPolicy
    /// Retries made for the current batch.
    public private(set) var attempt = 0

    /// Delivery of a new batch under `policy`.
    public init(policy: ReconnectPolicy) { self.policy = policy }

    /// A new batch begins: its retries count from zero.
    public mutating func startBatch() { attempt = 0 }

    /// Decides after an attempt. `stopping` is true once the bridge was told to stop and no more
    /// events will come; `unitRandom` in 0..<1 picks the jitter of a retry delay.
    public mutating func attemptFinished(_ result: PusherBatchAttempt, stopping: Bool, unitRandom: Double) -> PusherBatchDecision {
        let reason: String
        switch result {
        case .accepted:
            return .delivered
        case .status(let status, let body) where Self.pausesDelivery(status: status):
            let reason = Self.pauseReason(status: status, body: body)
            if stopping { return .keepForNextStart(reason: reason) }
            return .pause(after: policy.maxDelay, reason: reason)
        case .status(let status, let body) where !Self.isRetryable(status: status):
            return .deadLetter(.rejectedByPusher(status: status, body: body))
        case .unsendable(let status, let body):
            return .deadLetter(.rejectedByPusher(status: status, body: body))
        case .status(let status, let body):
            reason = "HTTP \(status): \(body)"
        case .networkError(let message), .clientEventFailed(let message):
            reason = message
        }
        if stopping { return .keepForNextStart(reason: reason) }
        let delay = policy.delay(attempt: attempt, unitRandom: unitRandom)
        attempt += 1
        return .retry(after: delay, attempt: attempt, reason: reason)
    }

    /// 5xx (Pusher is failing) and 429 (rate limited) pass; other statuses are final.
    public static func isRetryable(status: Int) -> Bool { status >= 500 || status == 429 }

    /// 403: the app is over its quota or disabled — it passes when the account is fixed, not by
    /// itself soon, and the events are fine: pause rather than dead-letter them.
    public static func pausesDelivery(status: Int) -> Bool { status == 403 }

    /// Longest part of Pusher's answer kept in a pause reason (it is shown by `/readyz` and STATUS=).
    public static let pauseReasonBodyLimit = 200

    /// The reason a pause is reported with: `pusher api refused with 403 (over quota or app disabled): BODY`,
    /// the body on one line and cut to ``pauseReasonBodyLimit`` characters.
    public static func pauseReason(status: Int, body: String) -> String {
        var line = String(body.map { $0.isNewline ? " " : $0 }).trimmingSpaces()
        if line.count > pauseReasonBodyLimit { line = String(line.prefix(pauseReasonBodyLimit)) + "…" }
        let head = "pusher api refused with \(status) (over quota or app disabled)"
        return line.isEmpty ? head : head + ": " + line
    }
}
