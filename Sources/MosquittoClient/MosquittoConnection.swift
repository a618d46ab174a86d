import CMosquitto
import DequeModule
import Dispatch
import Locking
import Logging

#if canImport(FoundationEssentials)
    import FoundationEssentials
    import Glibc
#else
    import Foundation
#endif

/// How a publisher learns that its publish completed.
enum PublishCompletion: Sendable {
    /// On `MQTTClient.completions`.
    case stream
    /// By resuming the task awaiting `MQTTClient.publish`.
    case continuation(CheckedContinuation<Void, any Error>)
}

/// A task waiting for room in the in-flight window.
typealias RoomWaiter = CheckedContinuation<MQTTPublishID, any Error>
/// A task waiting for a SUBACK/UNSUBACK: granted QoS codes (empty for UNSUBACK).
typealias RequestWaiter = CheckedContinuation<[Int32], any Error>
/// A SUBSCRIBE or UNSUBSCRIBE of this client and the task waiting for it.
typealias ClientRequest = PendingRequest<RequestWaiter>

/// The thin owner of one libmosquitto handle and its network thread.
///
/// It decides nothing: `MQTTSessionStateMachine` (with `ConnectionStateMachine` for reconnect
/// timing) does. It runs libmosquitto on its own thread with `mosquitto_loop` (never
/// `loop_start`/`loop_forever`, whose built-in reconnect is quadratic and, for MQTT 5, ends for
/// good after a refused CONNACK — docs/mqtt-notes.md §6–7), feeds the machine what happened and
/// carries out its actions.
///
/// Every CONNECT goes through `mosquitto_connect_bind_v5`, because libmosquitto's reconnect
/// functions drop the CONNECT properties and an MQTT 5 session without a Session Expiry Interval
/// ends with the connection (docs/mqtt-notes.md §4).
///
/// The parts: this file (state, public operations), `+Configuration` (options applied to the
/// handle), `+NetworkThread` (the thread, the C callbacks, connect/drain/release),
/// `+PublishSubscribe` (handing publishes and requests to libmosquitto, completions).
///
/// Two locks, always taken in this order:
/// - `session` guards the machine. Publishes and requests are handed to libmosquitto while it is
///   held, so that nothing overtakes what the network thread sends after a CONNACK.
/// - `callbacks` guards what libmosquitto's callbacks record on the network thread (in-flight
///   accounting, acknowledgements that arrive before their `mid` is bound, connect/disconnect
///   events). Callbacks run while libmosquitto holds its own mutexes, so they take only this
///   lock (or the message buffer's) — never `session` — and no lock cycle with libmosquitto is
///   possible. It stays separate from `session` so that an acknowledgement costs one short lock.
final class MosquittoConnection: Sendable {
    /// A publish accepted while disconnected, sent after the next CONNACK.
    struct QueuedPublish: Sendable {
        /// The slot it holds in the in-flight window.
        var id: MQTTPublishID
        /// What to publish.
        var message: MQTTMessage
        /// How to tell the publisher.
        var completion: PublishCompletion
    }

    /// The session machine as this owner instantiates it.
    typealias Machine = MQTTSessionStateMachine<QueuedPublish, RequestWaiter>

    /// What `session` guards.
    struct Session: Sendable {
        /// Every decision about the session.
        var machine: Machine
        /// Tasks in `waitUntilStopped`, resumed once the handle is destroyed.
        var stopWaiters = WaiterQueue<Void>()
    }

    /// What libmosquitto's connect/disconnect callbacks reported during one `mosquitto_loop`.
    enum LoopEvent: Sendable {
        /// CONNACK with its return/reason code (0: accepted) and the Session Present flag.
        case connack(code: Int32, sessionPresent: Bool)
        /// The connection closed: a libmosquitto error code or an MQTT 5 DISCONNECT reason code.
        case disconnected(code: Int32)
    }

    /// What `callbacks` guards.
    struct CallbackRecord: Sendable {
        /// Publishes accepted and not completed, and the tasks waiting for room.
        var publishes: InFlightWindow<PublishCompletion, RoomWaiter>
        /// Stream completions collected on the network thread during one `mosquitto_loop`
        /// (kept here so an acknowledgement costs one lock).
        var deferredCompletions: [MQTTPublishCompletion] = []
        /// (Un)subscribes sent and not acknowledged, by message id.
        var requests = AckTable<ClientRequest, Result<[Int32], MQTTError>>()
        /// Identifies a task waiting for room, so its cancellation can find it.
        var nextWaiterToken: UInt64 = 1
        /// Connect/disconnect callbacks of the current `mosquitto_loop`, handled after it returns
        /// (outside libmosquitto's mutexes).
        var loopEvents: [LoopEvent] = []
        /// libmosquitto's last error log line while connecting (OpenSSL's reason for a TLS failure).
        var lastLibraryError: String?
        /// The last CONNACK's Shared Subscription Available (MQTT 5; true when absent, as the
        /// protocol says, and with MQTT 3.1.1). While false a `$share/` filter is not sent: a broker
        /// that says so may end the connection over it (ejabberd 23.01 does, docs/brokers.md).
        var sharedSubscriptionsAvailable = true
    }

    let configuration: MQTTConfiguration
    let logger: Logger
    let handle: MosquittoHandle
    let messageBuffer: MessageBuffer
    let completions: AsyncStream<MQTTPublishCompletion>
    let completionsContinuation: AsyncStream<MQTTPublishCompletion>.Continuation
    /// Takes stream completions instead of `completions` once set (`MQTTClient.handleCompletions`);
    /// cleared when the handle is released.
    let completionHandler = Locked<CompletionHandler?>(nil)
    /// Held by `flushCompletions` while it takes and delivers a batch: one flush at a time.
    let completionDelivery = Locked(())
    /// The last publish's property list, for the next with the same properties (`handOver`, under `session`).
    let propertyList = Locked(PublishPropertyList())

    /// A consumer's handler for publish outcomes. (A struct, not a bare closure in the lock: a
    /// closure read through the lock's generic `inout` is re-abstracted, and written back wrapped
    /// in one more thunk on every read.)
    struct CompletionHandler: Sendable {
        /// Called with the outcomes, in order.
        let handle: @Sendable ([MQTTPublishCompletion]) -> Void
    }
    let states: AsyncStream<MQTTConnectionState>
    let statesContinuation: AsyncStream<MQTTConnectionState>.Continuation

    let session: Locked<Session>
    let callbacks: Locked<CallbackRecord>
    /// Wakes the network thread from a backoff wait when a stop is requested (not a lock: the
    /// thread sleeps on it until the machine's deadline).
    let wake = DispatchSemaphore(value: 0)

    init(configuration: MQTTConfiguration, logger: Logger) throws(MQTTError) {
        let problems = configuration.problems
        guard problems.isEmpty else {
            throw MQTTError(
                kind: .invalidConfiguration,
                message: "invalid MQTT configuration: " + problems.joined(separator: "; "))
        }
        guard mosquittoLibraryInitialised else {
            throw MQTTError(kind: .library, message: "mosquitto_lib_init failed")
        }
        guard let raw = mosquitto_new(configuration.clientID, configuration.cleanSession, nil) else {
            throw MQTTError(kind: .library, message: "mosquitto_new failed (out of memory or invalid client id)")
        }
        self.handle = MosquittoHandle(raw: raw)
        self.configuration = configuration
        var logger = logger
        logger[metadataKey: "mqtt.client_id"] = "\(configuration.clientID)"
        self.logger = logger
        self.messageBuffer = MessageBuffer(policy: .init(configuration))
        self.session = Locked(
            Session(
                machine: Machine(
                    policy: configuration.reconnect, brokers: configuration.brokers.count,
                    drainTimeout: configuration.shutdownDrainTimeout)))
        self.callbacks = Locked(CallbackRecord(publishes: InFlightWindow(limit: configuration.maxInFlight)))
        (completions, completionsContinuation) = AsyncStream.makeStream(bufferingPolicy: .unbounded)
        (states, statesContinuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(256))
        do {
            try Self.configure(raw, configuration)
            Self.setCallbacks(raw)
        } catch {
            mosquitto_destroy(raw)
            throw error
        }
    }

    /// Runs `body` on the machine under `session` and yields a changed connection state to the
    /// state stream before the lock is released (so states arrive in the order they happened).
    func withMachine<Result>(_ body: (inout Session) -> sending Result) -> sending Result {
        session.withLock { (session: inout Session) -> sending Result in
            let result = body(&session)
            if let state = session.machine.takeConnectionStateChange() { statesContinuation.yield(state) }
            return result
        }
    }

    // MARK: - Public operations (any thread)

    /// Starts the network thread (once).
    func start() {
        switch withMachine({ $0.machine.startRequested() }) {
        case .startNetworkThread:
            // The thread holds `self` strongly until it has destroyed the handle, so the unretained
            // pointer given to libmosquitto stays valid for every callback.
            mosquitto_user_data_set(handle.raw, Unmanaged.passUnretained(self).toOpaque())
            let started = detachThread(name: "mqtt-\(configuration.clientID)") { [self] in self.networkThreadMain() }
            if !started { networkThreadNotStarted() }
        case .none:
            break
        }
    }

    /// The network thread could not be created: the client gives up at once, as after its last
    /// reconnect attempt (everything waiting fails, the state stream ends with `.stopped(error:)`),
    /// instead of leaving `run()` and `shutdown()` waiting for a thread that never comes.
    private func networkThreadNotStarted() {
        let error = MQTTError(kind: .library, message: "cannot start the MQTT network thread (pthread_create failed)")
        guard let release = withMachine({ $0.machine.networkThreadNotStarted(error) }) else { return }
        logger.error("giving up: no network thread", metadata: ["mqtt.error": "\(error)"])
        self.release(release)
    }

    /// Asks the network thread to drain, disconnect and stop. Does not wait.
    func requestStop() {
        switch withMachine({ $0.machine.stopRequested() }) {
        case .release(let release):
            // No network thread ever ran: the first stop request releases everything here.
            self.release(release)
        case .wakeNetworkThread:
            wake.signal()
        case .none:
            break
        }
    }

    /// Waits until the client has stopped and released the handle.
    func waitUntilStopped() async {
        await session.wait(in: { $1(&$0.stopWaiters) }, until: { $0.machine.isStopped ? () : nil })
    }

    var currentState: MQTTConnectionState { session.withLock { $0.machine.connectionState } }
    var inFlightCount: Int { callbacks.withLock { $0.publishes.used } }

    /// Takes a slot in the in-flight window, waiting for one when it is full.
    func reserveSlot() async throws -> MQTTPublishID {
        if let id = callbacks.withLock({ $0.publishes.tryReserve() }) { return id }
        let token = callbacks.withLock { record in
            defer { record.nextWaiterToken += 1 }
            return record.nextWaiterToken
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: RoomWaiter) in
                if Task.isCancelled {
                    continuation.resume(throwing: CancellationError())
                    return
                }
                // Checked and registered under `session`, so `release` (which the machine orders
                // under `session`, then fails all waiters) cannot miss this waiter.
                let outcome: Result<MQTTPublishID?, MQTTError> = session.withLock { session in
                    if session.machine.isReleased { return .failure(.shutdown) }
                    return .success(callbacks.withLock { $0.publishes.reserveOrWait(token: token, continuation) })
                }
                switch outcome {
                case .failure(let error): continuation.resume(throwing: error)
                case .success(.some(let id)): continuation.resume(returning: id)
                case .success(.none): break
                }
            }
        } onCancel: {
            callbacks.withLock { $0.publishes.cancelWait(token: token) }?.resume(throwing: CancellationError())
        }
    }

    /// Takes a slot if one is free.
    func tryReserveSlot() -> MQTTPublishID? {
        callbacks.withLock { $0.publishes.tryReserve() }
    }

    /// Test hook: shuts the socket down under libmosquitto's feet, as a dying network would,
    /// so the broker sees no DISCONNECT (Last Will tests).
    func dropConnectionUncleanly() {
        session.withLock { session in
            guard !session.machine.isReleased else { return }
            let fd = mosquitto_socket(handle.raw)
            if fd >= 0 { _ = Glibc.shutdown(fd, Int32(SHUT_RDWR)) }
        }
    }
}
