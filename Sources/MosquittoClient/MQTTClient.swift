import Logging
import MQTTVocabulary

/// An MQTT 3.1.1/5 client over libmosquitto, with our own reconnect policy.
///
/// ```swift
/// let client = try MQTTClient(configuration: .init(host: "127.0.0.1", clientID: "bridge-1"))
/// client.start()
/// _ = try await client.subscribe(MQTTSubscription("sensors/#", qos: .atLeastOnce, noLocal: true))
/// try await client.publish(MQTTMessage(topic: "status", payload: Array("online".utf8), qos: .atLeastOnce, retain: true))
/// for await message in client.messages { ... }
/// await client.shutdown()
/// ```
///
/// **Publishing.** Three ways, all bounded by `maxInFlight` publishes accepted and not completed:
/// - `publish(_:)` waits for room, then for the acknowledgement (QoS 1 PUBACK, QoS 2 PUBCOMP;
///   QoS 0: written to the socket).
/// - `send(_:)` waits for room only and returns an `MQTTPublishID`; the outcome arrives on
///   `completions`. Keeps thousands in flight from one task.
/// - `trySend(_:)` never waits: it throws `inFlightLimitReached` when the window is full.
///
/// **While disconnected** (documented rule): QoS ≥ 1 publishes are accepted into the in-flight
/// window (so at most `maxInFlight` of them) and sent after the next CONNACK, in order;
/// publishes that libmosquitto had sent but not seen acknowledged are re-sent by libmosquitto
/// after reconnect. QoS 0 publishes fail at once with `notConnected` (never silently lost), and
/// QoS 0 publishes not yet written when the connection drops complete with `connectionLost`.
/// On `shutdown()` whatever is still unacknowledged after `shutdownDrainTimeout` completes with
/// `shutdown`: the caller keeps it (the bridge's spool) for the next run.
///
/// **Subscriptions** are remembered; after a reconnect where the broker reports no session
/// (`sessionPresent == false`) the client resubscribes all of them by itself.
///
/// **Incoming messages** go through a bounded buffer (`messageBufferSize`); see `MessageBuffer`
/// for the slow-consumer rule: with `incomingOverflow = .dropAfterTimeout` block the network
/// thread up to `backpressureTimeout`, then drop and count; with `.pauseReading` never drop, stop
/// reading from the broker instead and reconnect only once there is room (`IncomingFlowControl`).
public final class MQTTClient: Sendable {
    let connection: MosquittoConnection

    /// Creates the client and its libmosquitto handle; connects only on `start()`/`run()`.
    /// Throws `invalidConfiguration` with every problem found.
    public init(configuration: MQTTConfiguration, logger: Logger = Logger(label: "mqtt-client")) throws(MQTTError) {
        connection = try MosquittoConnection(configuration: configuration, logger: logger)
    }

    deinit {
        connection.requestStop()
    }

    /// The configuration the client runs with.
    public var configuration: MQTTConfiguration { connection.configuration }

    /// Incoming messages, in order; with several iterating tasks each message goes to one of
    /// them. Ends after shutdown.
    public var messages: MQTTMessageStream { MQTTMessageStream(buffer: connection.messageBuffer) }

    /// Connection state changes (single consumer; keeps the newest 256 when not read).
    public var states: AsyncStream<MQTTConnectionState> { connection.states }

    /// Outcomes of publishes made with `send`/`trySend` (single consumer; unbounded, but at most
    /// `maxInFlight` outstanding publishes feed it — read it to keep memory flat).
    public var completions: AsyncStream<MQTTPublishCompletion> { connection.completions }

    /// Sends the outcomes of `send`/`trySend` publishes to `handler` instead of ``completions``
    /// (those already on the stream stay there), in batches: what one pass of the network thread
    /// saw acknowledged, in order. Saves the consumer a task wake-up per batch.
    ///
    /// `handler` runs on the client's network thread (or, for a publish that completes at once or
    /// fails on a lost connection or at shutdown, on the thread that noticed): it must be quick and
    /// must not wait for the client. Set it once, before publishing; it is released after shutdown.
    public func handleCompletions(_ handler: @escaping @Sendable ([MQTTPublishCompletion]) -> Void) {
        connection.completionHandler.withLock { $0 = .init(handle: handler) }
    }

    /// The current connection state.
    public var state: MQTTConnectionState { connection.currentState }

    /// Publishes accepted and not yet completed.
    public var inFlightCount: Int { connection.inFlightCount }

    /// Incoming messages dropped because the consumer stayed too slow (see `MessageBuffer`).
    public var droppedMessageCount: Int { connection.messageBuffer.droppedCount }

    /// Takes `configuration`'s incoming-flow settings (`incomingOverflow`, `messageBufferSize`,
    /// `messageBufferBytes`, `backpressureTimeout`) while running, without reconnecting; its other
    /// settings are ignored. A bridge whose rules change the MQTT → Pusher overflow default does
    /// this on reload (docs/contract.md §3).
    public func applyIncomingFlow(of configuration: MQTTConfiguration) {
        connection.messageBuffer.setPolicy(.init(configuration))
    }

    /// Starts connecting in the background (idempotent).
    public func start() {
        connection.start()
    }

    /// Starts and runs until `shutdown()` or until the calling task is cancelled (then shuts down).
    public func run() async {
        connection.start()
        await withTaskCancellationHandler {
            await connection.waitUntilStopped()
        } onCancel: {
            connection.requestStop()
        }
    }

    /// Drains outstanding acknowledgements (bounded by `shutdownDrainTimeout`), sends DISCONNECT
    /// (no Last Will), stops the network thread and destroys the handle. Waits until done.
    public func shutdown() async {
        connection.requestStop()
        await connection.waitUntilStopped()
    }

    /// Asks for the same shutdown as ``shutdown()`` without waiting for it: no reconnect is made
    /// after this returns (a backoff wait ends at once).
    public func requestShutdown() {
        connection.requestStop()
    }

    /// Publishes and waits for completion (QoS 1: PUBACK, QoS 2: PUBCOMP, QoS 0: written).
    /// Waits for room first when `maxInFlight` publishes are outstanding.
    public func publish(_ message: MQTTMessage) async throws {
        let id = try await connection.reserveSlot()
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            do {
                try connection.accept(message, id: id, completion: .continuation(continuation))
            } catch {
                continuation.resume(throwing: error)
            }
        }
    }

    /// Publishes without waiting for the acknowledgement; waits only for room in the window.
    /// The outcome arrives on `completions` with the returned id.
    @discardableResult
    public func send(_ message: MQTTMessage) async throws -> MQTTPublishID {
        let id = try await connection.reserveSlot()
        try connection.accept(message, id: id, completion: .stream)
        return id
    }

    /// Publishes without waiting at all; throws `inFlightLimitReached` when the window is full.
    /// The outcome arrives on `completions` with the returned id.
    @discardableResult
    public func trySend(_ message: MQTTMessage) throws(MQTTError) -> MQTTPublishID {
        guard let id = connection.tryReserveSlot() else {
            throw MQTTError.inFlightLimitReached(configuration.maxInFlight)
        }
        try connection.accept(message, id: id, completion: .stream)
        return id
    }

    /// Subscribes and waits for the SUBACK (after the next CONNACK when disconnected).
    /// Returns the granted QoS. MQTT 5 options with MQTT 3.1.1 throw `unsupported`.
    @discardableResult
    public func subscribe(_ subscription: MQTTSubscription) async throws -> MQTTQoS {
        let codes = try await connection.request(.subscribe(subscription))
        return codes.first.flatMap { MQTTQoS(rawValue: Int($0)) } ?? subscription.qos
    }

    /// Unsubscribes and waits for the UNSUBACK; the filter is no longer resubscribed.
    public func unsubscribe(_ filter: String) async throws {
        _ = try await connection.request(.unsubscribe(filter))
    }
}
