import DequeModule
import Dispatch
import Synchronization

/// The bounded hand-over of incoming messages from libmosquitto's network thread to one consumer.
///
/// The rule for a slow consumer (MQTT-NOTES §1–2): libmosquitto has already acknowledged a
/// message when `on_message` runs, so dropping it loses data. When the buffer is full, the
/// network thread therefore **blocks** — up to `backpressureTimeout` — waiting for room. While it
/// blocks it reads nothing more from the socket, so TCP flow control pushes back on the broker,
/// which keeps QoS ≥ 1 messages in our (persistent) session. Only if the consumer stays stuck
/// for longer than the timeout is the message dropped, counted (`droppedCount`) and logged by
/// the owner. Blocking also delays PUBACKs for our own publishes and keep-alive pings, so the
/// timeout should stay well below 1.5 × keep-alive.
final class MessageBuffer: Sendable {
    private struct State {
        var items: Deque<MQTTMessage> = []
        var consumer: CheckedContinuation<MQTTMessage?, Never>?
        var finished = false
        var producerWaiting = false
        var dropped = 0
        var highWater = 0
    }

    private let state = Mutex(State())
    private let room = DispatchSemaphore(value: 0)
    /// Maximum buffered messages.
    let capacity: Int

    init(capacity: Int) {
        self.capacity = max(capacity, 1)
    }

    /// Messages dropped because the consumer did not make room within the timeout.
    var droppedCount: Int { state.withLock { $0.dropped } }

    /// Messages buffered right now.
    var count: Int { state.withLock { $0.items.count } }

    /// Called on the network thread. Returns `false` when the message was dropped (buffer still
    /// full after `maxWait`, or the buffer finished).
    func push(_ message: MQTTMessage, maxWait: Duration) -> Bool {
        let deadline = ContinuousClock.now + maxWait
        while true {
            enum Step { case delivered(CheckedContinuation<MQTTMessage?, Never>?), finished, full }
            let step: Step = state.withLock { state in
                if state.finished { return .finished }
                if let consumer = state.consumer {
                    state.consumer = nil
                    return .delivered(consumer)
                }
                if state.items.count < capacity {
                    state.items.append(message)
                    state.highWater = max(state.highWater, state.items.count)
                    return .delivered(nil)
                }
                state.producerWaiting = true
                return .full
            }
            switch step {
            case .delivered(let consumer):
                consumer?.resume(returning: message)
                return true
            case .finished:
                return false
            case .full:
                let now = ContinuousClock.now
                if now >= deadline {
                    state.withLock {
                        $0.dropped += 1
                        $0.producerWaiting = false
                    }
                    return false
                }
                // Wake at least every 50 ms to re-check; a stale signal only causes a re-check.
                let wait = min(now.duration(to: deadline), .milliseconds(50))
                _ = room.wait(timeout: .now() + .nanoseconds(Int(wait.seconds * 1e9)))
            }
        }
    }

    /// The next message; `nil` once finished and drained, or when the task is cancelled.
    func next() async -> MQTTMessage? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<MQTTMessage?, Never>) in
                enum Step { case value(MQTTMessage?, wakeProducer: Bool), parked }
                let step: Step = state.withLock { state in
                    if let item = state.items.popFirst() {
                        let wake = state.producerWaiting
                        state.producerWaiting = false
                        return .value(item, wakeProducer: wake)
                    }
                    if state.finished || Task.isCancelled { return .value(nil, wakeProducer: false) }
                    state.consumer = continuation
                    return .parked
                }
                if case .value(let item, let wake) = step {
                    if wake { room.signal() }
                    continuation.resume(returning: item)
                }
            }
        } onCancel: {
            let consumer = state.withLock { state in
                defer { state.consumer = nil }
                return state.consumer
            }
            consumer?.resume(returning: nil)
        }
    }

    /// No more messages will come; the consumer drains what is buffered, then gets `nil`.
    func finish() {
        let consumer = state.withLock { state in
            state.finished = true
            defer { state.consumer = nil }
            return state.consumer
        }
        consumer?.resume(returning: nil)
        room.signal()
    }
}

/// The incoming messages of an `MQTTClient`, in arrival order. Single consumer: iterate it from
/// one task only.
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
}
