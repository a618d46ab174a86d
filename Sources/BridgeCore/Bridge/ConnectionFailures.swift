import BridgeVocabulary

/// Why a side cannot connect, in a few words an operator can act on (`/readyz`, the log), from
/// the client library's error text (docs/contract.md §5.5, §5.7).
///
/// The texts it recognizes are those of the two TLS stacks in use: swift-nio-ssl/BoringSSL on the
/// Pusher side (the host name is checked separately from the chain), OpenSSL through libmosquitto
/// on the MQTT side (one "certificate verify failed" for an untrusted chain and a wrong host name).
public enum ConnectionFailureReason {
    /// The short reason for `error`, a connection failure of `side` while connecting to `host`.
    public static func summarize(_ error: String, side: BridgeSide, host: String) -> String {
        // BoringSSL spells reasons CERTIFICATE_VERIFY_FAILED, OpenSSL "certificate verify failed".
        let lowered = error.lowercased().replacingUnderscores()
        if lowered.contains("failedtovalidatehostname") || lowered.contains("hostname mismatch") {
            return "TLS host name mismatch: the server's certificate is not for \(host)"
        }
        if lowered.contains("cannotuseipaddressinsni") {
            return "TLS to an IP address (\(host)) is not supported: set host to a DNS name in the server's certificate"
        }
        if lowered.contains("certificate verify failed") {
            switch side {
            case .pusher: return "TLS certificate verify failed: not signed by a CA in ca_file (or the system trust store)"
            case .mqtt: return "TLS certificate verify failed: not signed by a CA in ca_file, or not issued for \(host)"
            }
        }
        if lowered.contains("alert certificate required") || lowered.contains("alert bad certificate")
            || lowered.contains("alert unknown ca") || lowered.contains("alert certificate unknown")
        {
            return "TLS: the server refused the client certificate (cert_file, key_file)"
        }
        if lowered.contains("connection refused") { return "connection refused by \(host)" }
        if let range = lowered.firstRange(of: "ssl routines:") {
            // OpenSSL's "error:0A000086:SSL routines::<reason>" or BoringSSL's "…:OPENSSL_internal:<REASON> at …".
            let tail = lowered[range.upperBound...].split(separator: " at ").first ?? ""
            let reason = tail.split(separator: ":", omittingEmptySubsequences: true).last.map(String.init) ?? ""
            return "TLS handshake failed: " + reason.trimmingSpaces()
        }
        let firstLine = error.split(separator: "\n", maxSplits: 1).first.map(String.init) ?? error
        return firstLine.count > 200 ? String(firstLine.prefix(200)) + "…" : firstLine
    }
}

/// Which connection failures to log, per side: the first one, each change of reason, and then at
/// most one a minute with the count of the failures left out — a retry storm with a wrong CA
/// writes one line, not one per attempt. A successful connection starts over.
///
/// Pure value type; time is passed in, never read.
public struct ConnectionFailureLog<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    /// What to do with one failure.
    public struct Decision: Sendable, Equatable {
        /// Whether to write the log line.
        public var log: Bool
        /// Failures of this side left out of the log since the last line written.
        public var leftOut: Int
    }

    private struct SideState: Sendable {
        var reason: String?
        var loggedAt: Instant?
        var leftOut = 0
    }

    private var pusher = SideState()
    private var mqtt = SideState()

    /// Nothing failed yet.
    public init() {}

    /// `side` failed to connect (or lost its connection) for `reason`.
    public mutating func failed(_ side: BridgeSide, reason: String, now: Instant) -> Decision {
        var state = side == .pusher ? pusher : mqtt
        defer {
            if side == .pusher { pusher = state } else { mqtt = state }
        }
        let quietLongEnough = state.loggedAt.map { $0.duration(to: now) >= .seconds(60) } ?? true
        guard state.reason != reason || quietLongEnough else {
            state.leftOut += 1
            return Decision(log: false, leftOut: state.leftOut)
        }
        let decision = Decision(log: true, leftOut: state.leftOut)
        state = SideState(reason: reason, loggedAt: now, leftOut: 0)
        return decision
    }

    /// `side` connected: the next failure is logged at once.
    public mutating func connected(_ side: BridgeSide) {
        if side == .pusher { pusher = SideState() } else { mqtt = SideState() }
    }
}

extension String {
    fileprivate func trimmingSpaces() -> String {
        String(drop(while: { $0 == " " }).reversed().drop(while: { $0 == " " }).reversed())
    }

    fileprivate func replacingUnderscores() -> String {
        String(map { $0 == "_" ? " " : $0 })
    }
}
