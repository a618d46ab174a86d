import TestSupport
import Testing

@testable import BridgeCore

/// Connection failures as operators see them: the reason from the client libraries' real error
/// texts (copied from runs against pusher-local and mosquitto over TLS), the rate-limited log
/// line, and `/readyz`'s reasons.
@Suite("Connection failures: reason, log rate, readiness")
struct ConnectionFailureTests {
    // Error texts as PusherClient and MosquittoClient report them.
    static let pusherWrongCA =
        "connection failed: handshakeFailed(NIOSSL.BoringSSLError.sslError([Error: 268435581 error:1000007d:SSL routines:"
        + "OPENSSL_internal:CERTIFICATE_VERIFY_FAILED at /x/swift-nio-ssl/Sources/CNIOBoringSSL/ssl/handshake.cc:320]))"
    static let pusherWrongHost =
        "connection failed: NIOSSLExtraError.failedToValidateHostname: Couldn't find localhost in certificate from peer"
    static let pusherIPAddress =
        "connection failed: NIOSSLExtraError.cannotUseIPAddressInSNI: "
        + "IP addresses cannot validly be used for Server Name Indication, got 127.0.0.1"
    static let mqttVerifyFailed =
        "connection to 127.0.0.1:41405 failed: A TLS error occurred. — "
        + "OpenSSL Error[0]: error:0A000086:SSL routines::certificate verify failed (code 8)"
    static let mqttClientCertificateRefused =
        "connection to 127.0.0.1:41405 failed: A TLS error occurred. — "
        + "OpenSSL Error[0]: error:0A00045C:SSL routines::tlsv13 alert certificate required (code 8)"
    static let mqttOtherTLS =
        "connection to 127.0.0.1:41405 failed: A TLS error occurred. — "
        + "OpenSSL Error[0]: error:0A00010B:SSL routines::wrong version number (code 8)"

    @Test func tlsReasonsNameTheCauseAndTheHost() {
        #expect(
            ConnectionFailureReason.summarize(Self.pusherWrongCA, side: .pusher, host: "localhost")
                == "TLS certificate verify failed: not signed by a CA in ca_file (or the system trust store)")
        #expect(
            ConnectionFailureReason.summarize(Self.pusherWrongHost, side: .pusher, host: "localhost")
                == "TLS host name mismatch: the server's certificate is not for localhost")
        #expect(
            ConnectionFailureReason.summarize(Self.pusherIPAddress, side: .pusher, host: "127.0.0.1")
                == "TLS to an IP address (127.0.0.1) is not supported: set host to a DNS name in the server's certificate")
        // libmosquitto reports an untrusted chain and a wrong host name alike: the reason names both.
        #expect(
            ConnectionFailureReason.summarize(Self.mqttVerifyFailed, side: .mqtt, host: "127.0.0.1")
                == "TLS certificate verify failed: not signed by a CA in ca_file, or not issued for 127.0.0.1")
        #expect(
            ConnectionFailureReason.summarize(Self.mqttClientCertificateRefused, side: .mqtt, host: "127.0.0.1")
                == "TLS: the server refused the client certificate (cert_file, key_file)")
        #expect(
            ConnectionFailureReason.summarize(Self.mqttOtherTLS, side: .mqtt, host: "127.0.0.1")
                == "TLS handshake failed: wrong version number (code 8)")
    }

    @Test func otherFailuresKeepTheirFirstLineShortened() {
        #expect(
            ConnectionFailureReason.summarize("cannot connect to 127.0.0.1:1: Connection refused", side: .mqtt, host: "127.0.0.1")
                == "connection refused by 127.0.0.1")
        #expect(ConnectionFailureReason.summarize("connection lost\nmore detail", side: .mqtt, host: "h") == "connection lost")
        let long = String(repeating: "x", count: 500)
        #expect(ConnectionFailureReason.summarize(long, side: .pusher, host: "h") == String(repeating: "x", count: 200) + "…")
        #expect(ConnectionFailureReason.summarize("", side: .pusher, host: "h") == "")
    }

    @Test func aRetryStormWritesOneLineAMinuteAndANewReasonAtOnce() {
        var log = ConnectionFailureLog<TestInstant>()
        let t0 = TestInstant.at(milliseconds: 0)
        #expect(log.failed(.mqtt, reason: "a", now: t0) == .init(log: true, leftOut: 0))
        for second in 1...59 {
            #expect(log.failed(.mqtt, reason: "a", now: t0.advanced(by: .seconds(second))) == .init(log: false, leftOut: second))
        }
        // The other side is counted on its own.
        #expect(log.failed(.pusher, reason: "a", now: t0.advanced(by: .seconds(30))) == .init(log: true, leftOut: 0))
        #expect(log.failed(.mqtt, reason: "a", now: t0.advanced(by: .seconds(60))) == .init(log: true, leftOut: 59))
        #expect(log.failed(.mqtt, reason: "a", now: t0.advanced(by: .seconds(61))) == .init(log: false, leftOut: 1))
        // A different reason is news.
        #expect(log.failed(.mqtt, reason: "b", now: t0.advanced(by: .seconds(62))) == .init(log: true, leftOut: 1))
        // After a connection, the next failure is logged at once.
        log.connected(.mqtt)
        #expect(log.failed(.mqtt, reason: "b", now: t0.advanced(by: .seconds(63))) == .init(log: true, leftOut: 0))
    }

    @Test func readinessShowsTheReasonUntilTheSideConnects() throws {
        var machine = try BridgeStateMachineTests.machine()
        let t0 = TestInstant.at(milliseconds: 0)
        let millis = Fixture.time.millisecondsSince1970
        let reason = ConnectionFailureReason.summarize(Self.mqttVerifyFailed, side: .mqtt, host: "127.0.0.1")
        #expect(machine.connectionFailed(.mqtt, reason: reason, now: t0).log)
        #expect(!machine.connectionFailed(.mqtt, reason: reason, now: t0.advanced(by: .seconds(2))).log)
        _ = machine.mqttConnectionChanged(to: "disconnected", connected: false, now: t0, receivedAtMillis: millis)
        #expect(machine.connectionFailed(.pusher, reason: "TLS host name mismatch: x", now: t0).log)
        _ = machine.pusherConnectionChanged(to: "reconnecting", connected: false, wasConnected: false, receivedAtMillis: millis)
        #expect(
            machine.connectivity.notReadyReasons == [
                "pusher reconnecting: TLS host name mismatch: x",
                "mqtt disconnected: TLS certificate verify failed: not signed by a CA in ca_file, or not issued for 127.0.0.1",
            ])
        _ = machine.mqttConnectionChanged(to: "connected", connected: true, now: t0, receivedAtMillis: millis)
        #expect(machine.connectivity.notReadyReasons == ["pusher reconnecting: TLS host name mismatch: x"])
        #expect(machine.connectivity.mqttProblem == nil)
        // Connected again: the next failure is news.
        #expect(machine.connectionFailed(.mqtt, reason: reason, now: t0.advanced(by: .seconds(3))).log)
        _ = machine.pusherConnectionChanged(to: "connected", connected: true, wasConnected: false, receivedAtMillis: millis)
        _ = machine.mqttConnectionChanged(to: "connected", connected: true, now: t0, receivedAtMillis: millis)
        #expect(machine.connectivity.isReady)
        #expect(machine.connectivity.notReadyReasons.isEmpty)
    }
}
