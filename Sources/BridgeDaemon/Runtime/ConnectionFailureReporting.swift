import BridgeCore
import Logging

/// A connection failure of either side, as operators see it: the reason in `/readyz` until the
/// side connects, and one error line naming the side and the reason — the first failure, each
/// new reason, else at most one a minute (docs/contract.md §5.5).
extension BridgeRuntime {
    /// `side` could not connect or lost its connection; `error` is the client's error text.
    func reportConnectionFailure(_ side: BridgeSide, error: String) {
        let host = side == .pusher ? connection.pusher.host : connection.mqtt.host
        let reason = ConnectionFailureReason.summarize(error, side: side, host: host)
        let now = ContinuousClock.now
        let decision = withBridge { $0.connectionFailed(side, reason: reason, now: now) }
        guard decision.log else { return }
        var metadata: Logger.Metadata = ["error": "\(error)"]
        if decision.leftOut > 0 { metadata["failures_not_logged"] = "\(decision.leftOut)" }
        logger.error("\(side.rawValue): cannot connect: \(reason)", metadata: metadata)
    }
}
