import Logging
import MosquittoClient

/// Another process using this bridge's MQTT client id (docs/contract.md §7.4, "identity"; §5.7):
/// the broker hands the session to whichever connected last, so two such processes take it from
/// each other in turn. ``MQTTSessionTakeoverDetector`` recognises it from the MQTT states
/// (reason 0x8E, or connections lost right after their CONNACK again and again, which is all
/// mosquitto 2.0.11 shows); this reports it — an error line naming the client id,
/// `errors_total{kind="mqtt_session_takeover"}`, `/readyz` — and in a cluster the member that
/// recognised it first gives way (``BridgeSupervisor/sessionTakenOver(_:)``).
extension BridgeRuntime {
    /// The MQTT client reported CONNACK.
    func mqttSessionConnected() {
        let now = ContinuousClock.now
        decisions.withLock { $0.sessionTakeover.connected(now: now) }
    }

    /// The MQTT client reported `.disconnected` with `error` (a lost connection or a failed attempt).
    func mqttSessionDisconnected(_ error: MQTTError) {
        let now = ContinuousClock.now
        let decision = decisions.withLock { $0.sessionTakeover.disconnected(reasonCode: error.code, now: now) }
        let cause: String
        switch decision {
        case .none:
            return
        case .takenOver:
            cause = "the broker closed the connection with reason 0x8E, session taken over"
        case .takeoverPattern(let losses, let within):
            cause = "the broker closed \(losses) connections in \(within.roundedToMilliseconds) right after accepting them"
        }
        metrics.errors(bridge: name, kind: "mqtt_session_takeover").increment()
        logger.error(
            "mqtt: \(Self.sessionTakeoverProblem(clientID: connection.effectiveMQTTClientID))",
            metadata: ["mqtt.client_id": "\(connection.effectiveMQTTClientID)", "reason": "\(cause)"])
        // In a cluster the member that recognised it first gives way.
        perform { $0.sessionTakenOver($1) }
    }

    /// Why `/readyz` fails while another process seems to take the session over, nil otherwise.
    /// In a cluster the member that gave way says so itself (``clusterReadinessProblem``).
    var sessionTakeoverProblem: String? {
        guard cluster == nil else { return nil }
        let now = ContinuousClock.now
        guard decisions.withLock({ $0.sessionTakeover.isSuspected(now: now) }) else { return nil }
        return Self.sessionTakeoverProblem(clientID: connection.effectiveMQTTClientID)
    }

    /// The problem in words, naming the client id and the likely cause.
    static func sessionTakeoverProblem(clientID: String) -> String {
        "another process uses MQTT client id \(clientID) — a second instance with the same config? "
            + "The broker keeps closing this connection right after accepting it (session taken over)"
    }
}

extension Duration {
    /// The duration rounded to whole milliseconds, for log lines.
    fileprivate var roundedToMilliseconds: Duration {
        let (seconds, attoseconds) = components
        return .milliseconds(seconds * 1000 + attoseconds / 1_000_000_000_000_000)
    }
}
