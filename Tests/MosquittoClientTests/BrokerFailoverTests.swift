import Backoff
import MQTTVocabulary
import Testing

@testable import MosquittoClient

/// Broker failover (`MQTTConfiguration.failover`): which address each attempt uses, with the
/// backoff unchanged.
@Suite struct BrokerFailoverTests {
    let t0 = ContinuousClock.now
    let policy = ReconnectPolicy(
        initialDelay: .seconds(1), maxDelay: .seconds(8), multiplier: 2, jitter: 0, stableAfter: .seconds(30))
    let lost = MQTTError(kind: .connectionLost, message: "lost")
    let refused = MQTTError(kind: .connectionRefused, message: "refused", code: 134)

    /// Expected: the first attempt uses the first address; each failed attempt moves on to the
    /// next, round and round, at the usual backoff (1 s, 2 s, 4 s, …).
    @Test func failedAttemptsTryTheAddressesInTurn() {
        var machine = ConnectionStateMachine(policy: policy, brokers: 3)
        #expect(machine.start() == .connect(attempt: 0))
        var used = [machine.broker]
        var delays: [Duration] = []
        var now = t0
        for attempt in 1...5 {
            guard case .scheduleReconnect(let delay, _) = machine.connectFailed(refused, now: now, unitRandom: 0.5) else {
                Issue.record("expected a scheduled reconnect")
                return
            }
            delays.append(delay)
            now = now + delay
            #expect(machine.reconnectDue(now: now) == .connect(attempt: attempt))
            used.append(machine.broker)
        }
        #expect(used == [0, 1, 2, 0, 1, 2])
        #expect(delays == [1, 2, 4, 8, 8].map { Duration.seconds($0) })
    }

    /// Expected: a connection that worked stays on its address; once lost, the next attempt goes to
    /// the next address (a node that dropped us may be going down), after the usual delay.
    @Test func aLostConnectionMovesOnToTheNextAddress() {
        var machine = ConnectionStateMachine(policy: policy, brokers: 2)
        _ = machine.start()
        _ = machine.connackAccepted(sessionPresent: true, now: t0)
        #expect(machine.broker == 0)
        guard case .scheduleReconnect(let delay, _) = machine.connectionLost(lost, now: t0 + .seconds(60), unitRandom: 0.5) else {
            Issue.record("expected a scheduled reconnect")
            return
        }
        #expect(delay == .seconds(1))
        #expect(machine.reconnectDue(now: t0 + .seconds(61)) == .connect(attempt: 1))
        #expect(machine.broker == 1)
        _ = machine.connackAccepted(sessionPresent: false, now: t0 + .seconds(62))
        _ = machine.connectionLost(lost, now: t0 + .seconds(63), unitRandom: 0.5)
        #expect(machine.broker == 0)
    }

    @Test func oneAddressIsAlwaysTheFirst() {
        var machine = ConnectionStateMachine(policy: policy)
        _ = machine.start()
        _ = machine.connectFailed(refused, now: t0, unitRandom: 0.5)
        #expect(machine.broker == 0)
        _ = machine.reconnectDue(now: t0 + .seconds(1))
        _ = machine.connackAccepted(sessionPresent: true, now: t0 + .seconds(1))
        _ = machine.connectionLost(lost, now: t0 + .seconds(2), unitRandom: 0.5)
        #expect(machine.broker == 0)
    }

    /// Expected: the session machine reports the connection's address index, and a configuration
    /// lists `host:port` first, then the failover nodes; a bad failover node is a problem.
    @Test func theConfigurationListsEveryAddress() {
        let configuration = MQTTConfiguration(
            host: "node1", port: 1883,
            failover: [MQTTBrokerAddress(host: "node2", port: 1884), MQTTBrokerAddress(host: "::1", port: 1885)],
            clientID: "c")
        #expect(configuration.brokers.map(\.description) == ["node1:1883", "node2:1884", "[::1]:1885"])
        #expect(configuration.problems.isEmpty)
        let bad = MQTTConfiguration(host: "node1", failover: [MQTTBrokerAddress(host: "", port: 0)], clientID: "c")
        #expect(bad.problems.contains("a failover host must not be empty"))
        #expect(bad.problems.contains { $0.hasPrefix("failover port ") })
    }
}
