/// Decides, for each message an MQTT subscription delivers, whether it is new, an echo of the
/// bridge's own publish, or a QoS ≥ 1 redelivery after a session resumed.
///
/// - **Echoes** (MQTT 3.1.1 only; MQTT 5 subscriptions use No Local): every publish the bridge
///   hands to the broker is recorded in a ``LoopGuard`` before it is sent, and each record
///   suppresses exactly one message coming back.
/// - **Redeliveries**: after every connect the broker first resends what we had not
///   acknowledged. For at most `redeliveryWindow` after a connect, and only until the first QoS ≥ 1
///   message that is not a redelivery, incoming messages are checked against the
///   ``DuplicateFilter``'s sightings from earlier connections.
///
/// Pure value type; time is passed in, never read.
public struct InboundMQTTFilter<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    /// What a message is.
    public enum Verdict: Sendable, Equatable {
        /// Neither an echo nor a redelivery: route it.
        case new
        /// The broker sent back one of our own publishes.
        case echo
        /// A QoS ≥ 1 message received again after a reconnect.
        case redelivery
    }

    /// Whether echoes are recognised by content (MQTT 3.1.1), rather than by No Local (MQTT 5).
    public let guardsAgainstEchoes: Bool
    /// How long after a connect redeliveries are looked for.
    public let redeliveryWindow: Duration
    private var loopGuard: LoopGuard<Instant>
    private var duplicates: DuplicateFilter<Instant>
    private var redeliveryCheckUntil: Instant?

    /// A filter with the bridge's bounds: echoes recognised for 10 s, identities remembered for
    /// 30 s, at most 10 000 of each.
    public init(
        guardsAgainstEchoes: Bool, redeliveryWindow: Duration = .seconds(5),
        loopGuard: LoopGuard<Instant> = LoopGuard(window: .seconds(10), capacity: 10_000),
        duplicates: DuplicateFilter<Instant> = DuplicateFilter(window: .seconds(30), capacity: 10_000)
    ) {
        self.guardsAgainstEchoes = guardsAgainstEchoes
        self.redeliveryWindow = redeliveryWindow
        self.loopGuard = loopGuard
        self.duplicates = duplicates
    }

    /// Whether incoming messages are being checked for redelivery.
    public var isCheckingRedeliveries: Bool { redeliveryCheckUntil != nil }

    /// The connection to the broker is (again) up: what it resends first may be redeliveries.
    public mutating func connected(now: Instant) {
        redeliveryCheckUntil = now.advanced(by: redeliveryWindow)
        duplicates.startConnection()
    }

    /// The bridge is about to hand this publish to the broker (record before sending: the echo
    /// can come back on the network thread before the publish call returns).
    public mutating func publishing(_ digest: MessageDigest, now: Instant) {
        guard guardsAgainstEchoes else { return }
        loopGuard.recordPublish(digest, now: now)
    }

    /// A subscription delivered a message with this digest and QoS. The digest (a SHA-256 over the
    /// payload) is computed only when needed: for an echo check, or for a QoS ≥ 1 message, the
    /// only kind a broker redelivers — a QoS 0 message is neither checked nor remembered.
    public mutating func received(_ digest: @autoclosure () -> MessageDigest, qos: Int, now: Instant) -> Verdict {
        guard guardsAgainstEchoes || qos != 0 else { return .new }
        let digest = digest()
        if guardsAgainstEchoes, loopGuard.isOwnEcho(digest, now: now) { return .echo }
        guard qos != 0 else { return .new }
        if let until = redeliveryCheckUntil {
            if now < until, duplicates.isRedelivery(digest, now: now) { return .redelivery }
            // The broker resends unacknowledged messages before anything new: the first one that
            // is not a redelivery ends the check.
            redeliveryCheckUntil = nil
        }
        duplicates.record(digest, now: now)
        return .new
    }
}
