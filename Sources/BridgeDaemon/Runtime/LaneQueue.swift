import BridgeCore
import DequeModule
import Locking

#if canImport(Glibc)
    import Glibc
#endif

/// A small bounded FIFO between one producer and one consumer task: `push` waits while it is
/// full, `pop` while it is empty. One lane of MQTT → Pusher delivery (a channel always uses the
/// same lane, so its events stay in order while other lanes' requests are in flight).
final class LaneQueue<Element: Sendable>: Sendable {
    private struct State {
        var items: Deque<Element> = []
        var finished = false
        var consumer: CheckedContinuation<Void, Never>?
        var producer: CheckedContinuation<Void, Never>?
    }

    private enum PushStep {
        case pushed(CheckedContinuation<Void, Never>?)
        case full
        case finished
    }

    private let capacity: Int
    private let state = Locked(State())

    init(capacity: Int) { self.capacity = max(1, capacity) }

    var isFinished: Bool { state.withLock { $0.finished } }

    /// Appends, waiting for room. Returns false when the lane was finished (the element was not taken).
    func push(_ element: Element) async -> Bool {
        while true {
            let step: PushStep = state.withLock { state in
                if state.finished { return .finished }
                guard state.items.count < capacity else { return .full }
                state.items.append(element)
                defer { state.consumer = nil }
                return .pushed(state.consumer)
            }
            switch step {
            case .pushed(let consumer):
                consumer?.resume()
                return true
            case .finished:
                return false
            case .full:
                if Task.isCancelled { return false }
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let resumeNow = state.withLock { state in
                        if state.items.count < capacity || state.finished { return true }
                        state.producer = continuation
                        return false
                    }
                    if resumeNow { continuation.resume() }
                }
            }
        }
    }

    /// Up to `max` elements, waiting while empty; `[]` once finished and drained.
    func pop(max: Int) async -> [Element] {
        while true {
            let (taken, producer): ([Element]?, CheckedContinuation<Void, Never>?) = state.withLock { state in
                if state.items.isEmpty { return (state.finished ? [] : nil, nil) }
                var out: [Element] = []
                while out.count < max, let item = state.items.popFirst() { out.append(item) }
                defer { state.producer = nil }
                return (out, state.producer)
            }
            producer?.resume()
            if let taken { return taken }
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state in
                    if !state.items.isEmpty || state.finished { return true }
                    state.consumer = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        }
    }

    /// No more elements: the consumer drains what is left, then gets `[]`.
    func finish() {
        let (consumer, producer) = state.withLock { state in
            state.finished = true
            defer {
                state.consumer = nil
                state.producer = nil
            }
            return (state.consumer, state.producer)
        }
        consumer?.resume()
        producer?.resume()
    }
}

extension UTCTimestamp {
    /// The wall clock now (the daemon is the one place that reads it; the core takes time as data).
    static func now() -> UTCTimestamp {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return UTCTimestamp(millisecondsSince1970: Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000)
    }
}
