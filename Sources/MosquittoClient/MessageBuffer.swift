import DequeModule
import Dispatch
import Locking

/// The bounded hand-over of incoming messages from libmosquitto's network thread to one consumer.
///
/// The rule for a slow consumer (docs/mqtt-notes.md §1–2): libmosquitto has already acknowledged a
/// message when `on_message` runs, so dropping it loses data. When the buffer is full, the
/// network thread therefore **blocks** — up to `backpressureTimeout` — waiting for room. While it
/// blocks it reads nothing more from the socket, so TCP flow control pushes back on the broker,
/// which keeps QoS ≥ 1 messages in our (persistent) session. Only if the consumer stays stuck
/// for longer than the timeout is the message dropped, counted (`droppedCount`) and logged by
/// the owner. Blocking also delays PUBACKs for our own publishes and keep-alive pings, so the
/// timeout should stay well below 1.5 × keep-alive.
///
/// With `MQTTIncomingOverflow.pauseReading` the network thread uses ``append(_:)`` instead,
/// which never blocks and never drops: it stops reading from the socket while the buffer is
/// above its high-water mark (``IncomingFlowControl``), so the buffer overshoots that mark by at
/// most what one `mosquitto_loop` pass reads.
final class MessageBuffer: Sendable {
    /// How the network thread hands messages over: `MQTTConfiguration`'s incoming-flow settings,
    /// which ``MQTTClient/applyIncomingFlow(of:)`` may change while the client runs.
    struct Policy: Sendable, Equatable {
        var overflow: MQTTIncomingOverflow
        /// Maximum buffered messages (`messageBufferSize`; with `.pauseReading`, the high-water mark).
        var capacity: Int
        /// With `.pauseReading`, the payload bytes at which reading pauses (`messageBufferBytes`).
        var byteCapacity: Int
        /// With `.dropAfterTimeout`, how long the network thread waits for room.
        var backpressureTimeout: Duration

        init(_ configuration: MQTTConfiguration) {
            self.init(
                overflow: configuration.incomingOverflow, capacity: configuration.messageBufferSize,
                byteCapacity: configuration.messageBufferBytes, backpressureTimeout: configuration.backpressureTimeout)
        }

        init(overflow: MQTTIncomingOverflow, capacity: Int, byteCapacity: Int, backpressureTimeout: Duration) {
            self.overflow = overflow
            self.capacity = max(capacity, 1)
            self.byteCapacity = max(byteCapacity, 1)
            self.backpressureTimeout = backpressureTimeout
        }
    }

    private struct State: Sendable {
        var policy: Policy
        /// Counts the changes of ``policy``: the network thread rebuilds its flow control on a change.
        var policyVersion = 0
        var items: Deque<MQTTMessage> = []
        /// Parked `next()` calls, oldest first (several tasks may iterate; each message goes to one).
        var consumers = WaiterQueue<MQTTMessage?>()
        var finished = false
        var producerWaiting = false
        var dropped = 0
        /// Payload bytes of `items`.
        var bytes = 0

        /// The most messages ``items`` held since its storage was last released.
        var peak = 0

        mutating func append(_ message: MQTTMessage) {
            items.append(message)
            bytes += message.payload.count
            peak = max(peak, items.count)
        }

        mutating func popFirst() -> MQTTMessage? {
            guard let item = items.popFirst() else { return nil }
            bytes -= item.payload.count
            // A drained burst gives its storage back (a deque keeps its largest capacity otherwise).
            if items.isEmpty, peak > MessageBuffer.retainedCapacity {
                items = []
                peak = 0
            }
            return item
        }
    }

    private let state: Locked<State>
    private let room = DispatchSemaphore(value: 0)

    /// The messages whose storage is kept when the buffer empties; a larger burst's is released.
    static var retainedCapacity: Int { 64 }

    init(policy: Policy) {
        state = Locked(State(policy: policy))
    }

    /// A buffer of `capacity` messages that blocks then drops (the tests' buffer).
    convenience init(capacity: Int) {
        self.init(policy: Policy(overflow: .dropAfterTimeout, capacity: capacity, byteCapacity: .max, backpressureTimeout: .seconds(5)))
    }

    /// Maximum buffered messages.
    var capacity: Int { state.withLock { $0.policy.capacity } }

    /// The hand-over policy in force and the count of its changes.
    var policy: (policy: Policy, version: Int) { state.withLock { ($0.policy, $0.policyVersion) } }

    /// Replaces the hand-over policy; a producer waiting for room looks again at once.
    func setPolicy(_ policy: Policy) {
        let wake = state.withLock { state -> Bool in
            guard state.policy != policy else { return false }
            state.policy = policy
            state.policyVersion += 1
            return state.producerWaiting
        }
        if wake { room.signal() }
    }

    /// Whether a producer waits for room now (tests: a producer blocked on a full buffer).
    var producerIsWaiting: Bool { state.withLock { $0.producerWaiting } }

    /// Messages dropped because the consumer did not make room within the timeout.
    var droppedCount: Int { state.withLock { $0.dropped } }

    /// Messages buffered right now.
    var count: Int { state.withLock { $0.items.count } }

    /// The most messages buffered since the storage was last released (tests: a drained burst
    /// gives its storage back; a deque's capacity is not public).
    var storagePeak: Int { state.withLock { $0.peak } }

    /// Called on the network thread. Returns `false` when the message was dropped (buffer still
    /// full after `maxWait`, or the buffer finished).
    func push(_ message: MQTTMessage, maxWait: Duration) -> Bool {
        var deadline: ContinuousClock.Instant?
        while true {
            enum Step { case delivered(WakeUp<MQTTMessage?>), finished, full }
            let step: Step = state.withLock { state in
                if state.finished { return .finished }
                let consumer = state.consumers.resumeFirst(returning: message)
                if consumer.count > 0 { return .delivered(consumer) }
                // Room, or the policy changed to `pauseReading` while this waited (never drops).
                if state.items.count < state.policy.capacity || state.policy.overflow == .pauseReading {
                    state.append(message)
                    return .delivered(consumer)
                }
                state.producerWaiting = true
                return .full
            }
            switch step {
            case .delivered(let consumer):
                consumer.resume()
                return true
            case .finished:
                return false
            case .full:
                let now = ContinuousClock.now
                let until = deadline ?? now + maxWait
                deadline = until
                if now >= until {
                    state.withLock {
                        $0.dropped += 1
                        $0.producerWaiting = false
                    }
                    return false
                }
                // Sleep until the deadline: a consumer that takes a message while
                // `producerWaiting` is set signals `room` (the semaphore keeps a signal that comes
                // before this wait, so none is lost); a stale signal only causes a re-check.
                _ = room.wait(until: until)
            }
        }
    }

    /// Called on the network thread when it pauses reading instead (`pauseReading`): buffers the
    /// message whatever the level, never waits. Returns `false` only when the buffer finished.
    func append(_ message: MQTTMessage) -> Bool {
        enum Step { case delivered(WakeUp<MQTTMessage?>), finished }
        let step: Step = state.withLock { state in
            if state.finished { return .finished }
            let consumer = state.consumers.resumeFirst(returning: message)
            if consumer.count == 0 { state.append(message) }
            return .delivered(consumer)
        }
        switch step {
        case .delivered(let consumer):
            consumer.resume()
            return true
        case .finished:
            return false
        }
    }

    /// Messages and payload bytes buffered right now.
    var level: (messages: Int, bytes: Int) { state.withLock { ($0.items.count, $0.bytes) } }

    /// The next message; `nil` once finished and drained, or when the task is cancelled.
    func next() async -> MQTTMessage? {
        var wakeProducer = false
        let message = await state.wait(
            in: { $1(&$0.consumers) },
            until: { state in
                if let item = state.popFirst() {
                    wakeProducer = state.producerWaiting
                    state.producerWaiting = false
                    return .some(item)
                }
                return state.finished ? .some(nil) : nil
            },
            ifCancelled: { _ in nil })
        if wakeProducer { room.signal() }
        return message
    }

    /// The next message and up to `max - 1` more that are already buffered, in order; `[]` once
    /// finished and drained, or when the task is cancelled. A busy consumer takes a burst in one
    /// call (one lock, one producer wake-up) instead of one suspension per message.
    func next(max: Int) async -> [MQTTMessage] {
        guard let first = await next() else { return [] }
        guard max > 1 else { return [first] }
        var batch = [first]
        let wake: Bool = state.withLock { state in
            while batch.count < max, let item = state.popFirst() { batch.append(item) }
            guard batch.count > 1, state.producerWaiting else { return false }
            state.producerWaiting = false
            return true
        }
        if wake { room.signal() }
        return batch
    }

    /// No more messages will come; consumers drain what is buffered, then get `nil`.
    func finish() {
        state.withLock { state in
            state.finished = true
            return state.consumers.resumeAll(returning: nil)
        }.resume()
        room.signal()
    }
}

/// The incoming messages of an `MQTTClient`, in arrival order. Several tasks may iterate; each
/// message goes to exactly one of them.
public struct MQTTMessageStream: AsyncSequence, Sendable {
    public typealias Element = MQTTMessage
    let buffer: MessageBuffer

    /// Iterates the messages.
    public struct AsyncIterator: AsyncIteratorProtocol {
        let buffer: MessageBuffer

        public mutating func next() async -> MQTTMessage? {
            await buffer.next()
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(buffer: buffer)
    }

    /// The next message plus up to `max - 1` more already received, in arrival order; `[]` when
    /// the client stopped (or the task was cancelled). For consumers that handle bursts at once.
    public func next(max: Int) async -> [MQTTMessage] {
        await buffer.next(max: max)
    }
}

extension DispatchSemaphore {
    /// Waits for a signal until `deadline` at the latest. (A wait longer than a day returns
    /// after a day — the callers check their deadline again — so the conversion cannot overflow.)
    func wait(until deadline: ContinuousClock.Instant) -> DispatchTimeoutResult {
        let left = min(ContinuousClock.now.duration(to: deadline), .seconds(86_400))
        guard left > .zero else { return wait(timeout: .now()) }
        let (seconds, attoseconds) = left.components
        return wait(timeout: .now() + .nanoseconds(Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)))
    }
}
