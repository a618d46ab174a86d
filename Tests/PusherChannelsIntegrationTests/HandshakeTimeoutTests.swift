import Backoff
import Locking
import Logging
import NIOCore
import NIOPosix
import TestSupport
import Testing

@testable import PusherChannels

/// A server that accepts the connection and never answers the WebSocket upgrade (a stuck proxy):
/// the handshake timeout must end the attempt and the client must try again. Before the client
/// closed a connection still in its opening handshake, the machine's close went to a writer that
/// only starts with the WebSocket, and the client stayed in `reconnecting` for ever (`dropping`
/// has no deadline of its own).
@Suite struct HandshakeTimeoutTests {
    @Test func aServerThatNeverAnswersTheUpgradeIsLeftAtTheHandshakeTimeoutAndTriedAgain() async throws {
        let accepted = Locked(0)
        let listener = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                accepted.withLock { $0 += 1 }
                return channel.eventLoop.makeSucceededVoidFuture()
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        let port = listener.localAddress?.port ?? 0
        var logger = Logger(label: "pusher-test")
        logger.logLevel = .critical
        let client = PusherClient(
            options: PusherClientOptions(
                key: "key",
                host: .host("127.0.0.1", port: port),
                encrypted: false,
                handshakeTimeout: .seconds(1),
                reconnectPolicy: ReconnectPolicy(initialDelay: .milliseconds(100), maxDelay: .seconds(1), jitter: 0.1)
            ),
            logger: logger
        )
        let states = client.connectionStates()
        do {
            try await withRunningClient(client) { client in
                // Taken before connect(), which starts the handshake timer: a safe bound for `>=`.
                let started = ContinuousClock.now
                client.connect()
                let seen = try await withTimeout(15, "a second attempt after the handshake timeout") {
                    var seen: [PusherConnectionState] = []
                    for await change in states {
                        seen.append(change.current)
                        if seen.filter({ $0 == .connecting }).count == 2 { return seen }
                    }
                    throw TestFailure("state stream ended; saw \(seen)")
                }
                #expect(seen == [.connecting, .reconnecting, .connecting])
                #expect(ContinuousClock.now - started >= .seconds(1))
                // `connecting` comes before the connection: the second one reaches the server soon after.
                try await waitUntil("the second connection accepted") { accepted.withLock { $0 } >= 2 }
            }
        } catch {
            try? await listener.close()
            throw error
        }
        try? await listener.close()
    }
}
