import Backoff
import BridgeCore
import Foundation
import Locking
import Logging
import MQTTVocabulary
import MosquittoClient
import PusherChannels
import PusherLocal
import TestSupport

@testable import BridgeDaemon

/// Everything around one bridge under test: a real mosquitto, an in-process pusher-local, and the
/// test's own client on each side.
///
/// The bridge's rules (``conf``): MQTT `up/<x>` → Pusher channel `up-<x>`, event `reading`; Pusher
/// channel `down` → MQTT `down/<event>`, both at QoS 1. The test's MQTT client publishes to `up/…`
/// and holds a persistent QoS 1 subscription to `down/#` (it survives a broker restart: the broker
/// keeps it on disk); its Pusher client is subscribed to `up-x` and `up-probe` and reconnects on its
/// own; Pusher events are triggered through the HTTP API (``trigger(_:data:)``).
final class BridgeUnderTest: Sendable {
    let broker: Mosquitto
    let pusher: PusherLocalLauncher
    let stateDirectory: String
    let conf: BridgesConf
    let mqtt: MQTTClient
    let pusherClient: PusherClient
    let api: PusherHTTPClient
    let httpPool: PusherHTTPConnectionPool
    /// What the test's clients received: MQTT messages on `down/#`, Pusher events on `up-…`.
    let fromBridge = Locked(Received())
    private let tasks = Locked<[Task<Void, Never>]>([])
    private let probes = Locked(0)

    struct Received {
        var mqtt: [MQTTMessage] = []
        var pusher: [PusherEvent] = []
    }

    static let logger: Logger = {
        var logger = Logger(label: "bridge-test")
        logger.logLevel = ProcessInfo.processInfo.environment["BRIDGE_TEST_LOG"] == nil ? .critical : .debug
        return logger
    }()

    static let fastReconnect = ReconnectPolicy(
        initialDelay: .milliseconds(100), maxDelay: .milliseconds(500), multiplier: 2, jitter: 0.1, stableAfter: .seconds(2))

    /// Starts both servers and the test's clients, and waits until the test's clients are subscribed.
    init() async throws {
        broker = try Mosquitto(.init(persistence: true))
        try await broker.start()
        pusher = try PusherLocalLauncher()
        try await pusher.start()
        stateDirectory = try temporaryDirectory("bridge-it")
        var conf = BridgesConf(pusherPort: pusher.port, mqttPort: broker.port, stateDirectory: stateDirectory)
        conf.rules = [
            BridgesConf.mqttToPusher(name: "up", topic: "up/+", channel: "up-{1}", event: "reading"),
            BridgesConf.pusherToMQTT(name: "down", channel: "down", topic: "down/{event}"),
        ]
        self.conf = conf

        let mqtt = try MQTTClient(
            configuration: MQTTConfiguration(
                host: "127.0.0.1", port: broker.port, clientID: "test-side-\(UUID().uuidString.prefix(8))", protocolVersion: .v5,
                cleanSession: false, keepAlive: .seconds(5), reconnect: Self.fastReconnect, backpressureTimeout: .seconds(2),
                shutdownDrainTimeout: .seconds(1)),
            logger: Self.logger)
        self.mqtt = mqtt
        mqtt.start()
        let pusherClient = PusherClient(
            options: PusherClientOptions(
                key: conf.pusherKey, host: .host("127.0.0.1", port: pusher.port), encrypted: false, reconnectPolicy: Self.fastReconnect),
            logger: Self.logger)
        self.pusherClient = pusherClient
        httpPool = PusherHTTPConnectionPool(maximumConnectionsPerHost: 2)
        api = PusherHTTPClient(
            appID: conf.pusherAppID, key: conf.pusherKey, secret: conf.pusherSecret, host: .host("127.0.0.1", port: pusher.port),
            encrypted: false, timeout: .seconds(5), connectionPool: httpPool, logger: Self.logger)

        let received = fromBridge
        let messages = mqtt.messages
        let updates = pusherClient.updates()
        tasks.withLock { tasks in
            tasks.append(Task { for await message in messages { received.withLock { $0.mqtt.append(message) } } })
            tasks.append(
                Task {
                    for await update in updates {
                        if case .event(let event) = update, event.channel?.hasPrefix("up-") == true {
                            received.withLock { $0.pusher.append(event) }
                        }
                    }
                })
            tasks.append(Task { try? await pusherClient.run() })
        }
        _ = pusherClient.subscribe("up-x")
        _ = pusherClient.subscribe("up-probe")
        pusherClient.connect()

        try await waitUntil("the test's MQTT client is connected") {
            if case .connected = mqtt.state { return true }
            return false
        }
        _ = try await mqtt.subscribe(MQTTSubscription("down/#", qos: .atLeastOnce))
        _ = try await mqtt.subscribe(MQTTSubscription(statusTopic, qos: .atLeastOnce))
        try await waitUntilSubscribedAtPusher(["up-x", "up-probe"], what: "the test's Pusher client")
    }

    /// Stops the test's clients and both servers and removes the state directory.
    /// A rig for `body`, torn down afterwards whether `body` returned or threw.
    static func with(_ body: (BridgeUnderTest) async throws -> Void) async throws {
        let rig = try await BridgeUnderTest()
        do {
            try await body(rig)
        } catch {
            await rig.tearDown()
            throw error
        }
        await rig.tearDown()
    }

    func tearDown() async {
        for task in tasks.withLock({ $0 }) { task.cancel() }
        await mqtt.shutdown()
        for task in tasks.withLock({ $0 }) { await task.value }
        await httpPool.shutdown()
        await pusher.stop()
        await broker.stop()
        try? FileManager.default.removeItem(atPath: stateDirectory)
    }

    // MARK: The bridge

    /// A runtime for ``conf`` (or `conf`), as the daemon makes one.
    func makeRuntime(_ conf: BridgesConf? = nil, metrics: BridgeMetrics = BridgeMetrics()) throws -> BridgeRuntime {
        let configuration = try (conf ?? self.conf).parse()
        let settings = try configuration.bridges.first.orThrow("no bridge in the file")
        return try BridgeRuntime(
            settings: settings, daemon: configuration.daemon, metrics: metrics, logger: Self.logger, countsRecoveredAsReceived: true)
    }

    /// Waits until the bridge routes both ways: its Pusher connection holds `down` (pusher-local's
    /// own records say so), and a probe published to `up/probe` arrives as a Pusher event (so its
    /// MQTT subscription is in place: everything published after this reaches it). Returns once the
    /// last probe sent has arrived too, so that no probe is still under way afterwards.
    func waitUntilBridging() async throws {
        try await waitUntilSubscribedAtPusher(["down"], what: "the bridge")
        let probes = self.probes
        let first = probes.withLock { $0 } + 1
        let mqtt = self.mqtt
        func arrived() -> Set<Int> {
            Set(fromBridge.withLock { $0.pusher.filter { $0.channel == "up-probe" }.compactMap { Int($0.data ?? "") } })
        }
        // A new probe only every 200 ms: one sent before the bridge's subscription existed is not
        // delivered (the broker held no subscription of the bridge for it).
        var lastSent = ContinuousClock.now - .seconds(1)
        try await waitUntil("a probe published to up/probe arrives at Pusher") {
            if arrived().contains(where: { $0 >= first }) { return true }
            if ContinuousClock.now - lastSent >= .milliseconds(200) {
                lastSent = .now
                let n = probes.withLock {
                    $0 += 1
                    return $0
                }
                try await mqtt.publish(MQTTMessage(topic: "up/probe", payload: Array("\(n)".utf8), qos: .atLeastOnce))
            }
            return false
        }
        let last = probes.withLock { $0 }
        try await waitUntil("the last probe (\(last)) arrives at Pusher") { arrived().contains(last) }
    }

    /// Waits until pusher-local holds a connection subscribed to every channel of `channels`.
    func waitUntilSubscribedAtPusher(_ channels: Set<String>, what: String) async throws {
        let pusher = self.pusher
        try await waitUntil(
            "\(what) is subscribed to \(channels.sorted()) at pusher-local",
            detail: { "connections: \((try? pusher.running.connections()) ?? [])" }
        ) {
            guard let running = try? pusher.running else { return false }
            return running.connections().contains { channels.isSubset(of: $0.channels) }
        }
    }

    // MARK: Traffic

    /// Publishes `up/x` with `payload`, QoS 1, and waits for the broker's PUBACK.
    func publishUp(_ payload: String) async throws {
        try await mqtt.publish(MQTTMessage(topic: "up/x", payload: Array(payload.utf8), qos: .atLeastOnce))
    }

    /// Triggers `event` on the `down` channel through pusher-local's HTTP API.
    func trigger(_ event: String, data: String) async throws {
        _ = try await api.trigger(channels: ["down"], event: event, data: data)
    }

    /// The data of the `reading` events received on `up-x` (any event name when `event` is nil).
    func upData(event: String? = "reading") -> [String] {
        fromBridge.withLock { $0.pusher.filter { $0.channel == "up-x" && (event == nil || $0.name == event) }.compactMap(\.data) }
    }

    /// The bridge's status topic (docs/contract.md §4: retained `online`, `offline` when it stops).
    var statusTopic: String { "pusher-mqtt-bridge/\(conf.name)/status" }

    /// The payloads received on `topic`.
    func downPayloads(_ topic: String) -> [String] {
        fromBridge.withLock { $0.mqtt.filter { $0.topic == topic }.map { String(decoding: $0.payload, as: UTF8.self) } }
    }

    /// Waits until every one of `expected` was received (QoS 1 allows duplicates; none may be missing).
    func waitForAll(_ expected: [String], _ what: String, timeout: Duration = .seconds(30), in seen: @escaping @Sendable () -> [String])
        async throws
    {
        let wanted = Set(expected)
        try await waitUntil(
            "\(what): all \(wanted.count) arrived", timeout: timeout,
            detail: {
                let missing = wanted.subtracting(seen()).sorted()
                return "\(missing.count) missing: \(missing.prefix(20))" + (missing.count > 20 ? "…" : "")
            }
        ) { wanted.isSubset(of: Set(seen())) }
    }
}

extension Optional {
    func orThrow(_ message: String) throws -> Wrapped {
        guard let self else { throw TestFailure(message) }
        return self
    }
}

/// Runs `runtime` (as its service group would) until `body` returns, then stops it.
func withRunning<T: Sendable>(_ runtime: BridgeRuntime, _ body: () async throws -> T) async throws -> T {
    let task = Task { try await runtime.run() }
    do {
        let result = try await body()
        await runtime.stop(grace: .seconds(2))
        try await task.value
        return result
    } catch {
        await runtime.stop(grace: .zero)
        _ = try? await task.value
        throw error
    }
}
