import BridgeCore
import DequeModule
import Locking

#if canImport(Glibc)
    import Glibc
#endif

/// Which events a free lane sends next (pure: no I/O, no clock). Events wait per channel; a
/// channel has at most one batch out at a time, so its events leave in order, while other
/// channels' batches go out on the other lanes. A free lane takes the channel that has waited
/// longest, not a lane chosen by the channel's name: a request leaves as soon as any lane is free,
/// with what queued meanwhile, and `n` lanes keep `n` requests in flight over `n` channels or more
/// (docs/contract.md `[bridge.pusher] api_lanes`).
struct LaneSchedule<Element> {
    /// One batch for a lane, and the channels it holds until ``finished(_:)``.
    struct Batch {
        /// The events, oldest first per channel.
        var elements: [Element] = []
        /// The channels in the batch, each in flight until the batch is finished.
        var channels: [String] = []
    }

    /// Events not handed to a lane yet, per channel, oldest first, each with its size.
    private var waiting: [String: Deque<(element: Element, bytes: Int)>] = [:]
    /// Channels with events waiting and no batch out, in the order they became ready.
    private var ready: Deque<String> = []
    /// Channels with a batch out.
    private var inFlight: Set<String> = []
    /// How many events wait (handed-out ones no longer count).
    private(set) var count = 0
    /// The waiting events' sizes (as given to ``arrived(_:channel:bytes:)``) added up.
    private(set) var bytes = 0
    /// At most this many events wait; ``hasRoom`` is false beyond.
    let capacity: Int
    /// Once the waiting events' sizes reach this, ``hasRoom`` is false (one event always fits).
    let byteCapacity: Int

    /// An empty schedule holding at most `capacity` waiting events and, as far as whole events
    /// allow, `byteCapacity` bytes of them.
    init(capacity: Int, byteCapacity: Int = .max) {
        self.capacity = max(1, capacity)
        self.byteCapacity = max(1, byteCapacity)
    }

    /// Whether another event may be added.
    var hasRoom: Bool { count < capacity && bytes < byteCapacity }

    /// Whether a lane would get a batch now.
    var hasReady: Bool { !ready.isEmpty }

    /// An event of `bytes` for `channel` arrived; returns true when its channel became ready (a
    /// lane can take it).
    @discardableResult
    mutating func arrived(_ element: Element, channel: String, bytes: Int = 0) -> Bool {
        count += 1
        self.bytes += bytes
        let wasEmpty = waiting[channel, default: []].isEmpty
        waiting[channel, default: []].append((element, bytes))
        guard wasEmpty, !inFlight.contains(channel) else { return false }
        ready.append(channel)
        return true
    }

    /// The batch for a free lane: up to `max` events of the channel that has waited longest, then
    /// the next ready channels whose waiting events all fit in what is left (a channel is never
    /// split into a part batch behind another: what it cannot send now goes on another lane in
    /// full). Every channel in the batch is in flight until ``finished(_:)``. Empty when nothing is ready.
    mutating func nextBatch(max: Int) -> Batch {
        var batch = Batch()
        while batch.elements.count < max, let channel = ready.first {
            var events = waiting[channel] ?? []
            if !batch.channels.isEmpty && events.count > max - batch.elements.count { break }
            ready.removeFirst()
            while batch.elements.count < max, let event = events.popFirst() {
                batch.elements.append(event.element)
                bytes -= event.bytes
            }
            waiting[channel] = events.isEmpty ? nil : events
            inFlight.insert(channel)
            batch.channels.append(channel)
        }
        count -= batch.elements.count
        return batch
    }

    /// A batch was sent (or given up): its channels may go out again; returns how many became ready.
    @discardableResult
    mutating func finished(_ batch: Batch) -> Int {
        var readied = 0
        for channel in batch.channels {
            inFlight.remove(channel)
            if waiting[channel] != nil {
                ready.append(channel)
                readied += 1
            }
        }
        return readied
    }
}

extension LaneSchedule: Sendable where Element: Sendable {}
extension LaneSchedule.Batch: Sendable where Element: Sendable {}

/// The events between the MQTT → Pusher outbox and the delivery lanes: one producer (`push`, which
/// waits while ``LaneSchedule`` is full) and `api_lanes` consumers (`pop`, which waits until a
/// channel is ready), with ``LaneSchedule`` deciding which events a free lane sends.
final class LaneQueue<Element: Sendable>: Sendable {
    /// A lane's batch; hand it back with ``finished(_:)`` once it was sent or given up.
    typealias Batch = LaneSchedule<Element>.Batch

    private struct State {
        var schedule: LaneSchedule<Element>
        var finished = false
        /// Lanes waiting for a ready channel, oldest first (resumed with true: they were woken).
        var consumers: Deque<CheckedContinuation<Bool, Never>> = []
        /// Lanes woken that have not taken their batch yet: while one is on its way, no other is
        /// woken (it takes what is ready, whole channels together, and wakes the next if more is).
        var waking = 0
        var producer: CheckedContinuation<Void, Never>?

        /// One waiting lane to wake, unless one is on its way already or nothing is ready.
        mutating func laneToWake() -> CheckedContinuation<Bool, Never>? {
            guard waking == 0, schedule.hasReady, let consumer = consumers.popFirst() else { return nil }
            waking += 1
            return consumer
        }
    }

    private enum PushStep {
        case pushed
        case full
        case finished
    }

    private let state: Locked<State>
    /// An element's size, for the schedule's `byteCapacity`.
    private let size: @Sendable (Element) -> Int

    /// At most `capacity` events, and about `byteCapacity` bytes of them as measured by `size`,
    /// wait (the producer waits beyond).
    init(capacity: Int, byteCapacity: Int = .max, size: @escaping @Sendable (Element) -> Int = { _ in 0 }) {
        state = Locked(State(schedule: LaneSchedule(capacity: capacity, byteCapacity: byteCapacity)))
        self.size = size
    }

    var isFinished: Bool { state.withLock { $0.finished } }

    /// How many lanes wait for a ready channel now.
    var waitingLanes: Int { state.withLock { $0.consumers.count } }

    /// Adds `elements` (each with its channel) in order, waiting for room as needed, and wakes a
    /// waiting lane when a channel became ready. Returns false when the queue was finished (the
    /// elements from there on were not taken).
    func push(_ elements: some Collection<(element: Element, channel: String)>) async -> Bool {
        var rest = elements[...]
        while !rest.isEmpty {
            let (step, lane): (PushStep, CheckedContinuation<Bool, Never>?) = state.withLock { state in
                if state.finished { return (.finished, nil) }
                while state.schedule.hasRoom, let (element, channel) = rest.popFirst() {
                    state.schedule.arrived(element, channel: channel, bytes: size(element))
                }
                return (rest.isEmpty ? .pushed : .full, state.laneToWake())
            }
            lane?.resume(returning: true)
            switch step {
            case .pushed:
                return true
            case .finished:
                return false
            case .full:
                if Task.isCancelled { return false }
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let resumeNow = state.withLock { state in
                        if state.schedule.hasRoom || state.finished { return true }
                        state.producer = continuation
                        return false
                    }
                    if resumeNow { continuation.resume() }
                }
            }
        }
        return true
    }

    /// Adds one element for `channel`, waiting for room; false when the queue was finished.
    func push(_ element: Element, channel: String) async -> Bool {
        await push(CollectionOfOne((element: element, channel: channel)))
    }

    /// The next batch of up to `max` events, waiting until a channel is ready; an empty batch once
    /// finished and nothing is ready. With more ready than this batch took, the next waiting lane
    /// is woken: `n` lanes take `n` batches in a row, one after the other.
    func pop(max: Int) async -> Batch {
        var woken = false
        while true {
            let wasWoken = woken
            typealias Step = (batch: Batch?, producer: CheckedContinuation<Void, Never>?, lane: CheckedContinuation<Bool, Never>?)
            let (taken, producer, lane): Step = state.withLock { state -> Step in
                if wasWoken { state.waking = Swift.max(0, state.waking - 1) }
                // Once finished, a lane with nothing ready leaves: what waits behind a batch in
                // flight goes out on the lane that holds that batch.
                guard state.schedule.hasReady else { return (state.finished ? Batch() : nil, nil, nil) }
                let batch = state.schedule.nextBatch(max: max)
                defer { state.producer = nil }
                return (batch, state.producer, state.laneToWake())
            }
            producer?.resume()
            lane?.resume(returning: true)
            if let taken { return taken }
            woken = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let resumeNow = state.withLock { state in
                    if state.schedule.hasReady || state.finished { return true }
                    state.consumers.append(continuation)
                    return false
                }
                if resumeNow { continuation.resume(returning: false) }
            }
        }
    }

    /// The batch was sent or given up: its channels' next events may go out, on any lane. No lane
    /// is woken: the lane that hands the batch back asks for its next one at once (and wakes
    /// another if more is ready); after ``finish()`` every lane looks.
    func finished(_ batch: Batch) {
        state.withLock { _ = $0.schedule.finished(batch) }
    }

    /// No more elements: the lanes drain what is left, then get an empty batch.
    func finish() {
        let (consumers, producer) = state.withLock { state in
            state.finished = true
            state.waking += state.consumers.count
            defer {
                state.consumers = []
                state.producer = nil
            }
            return (state.consumers, state.producer)
        }
        for consumer in consumers { consumer.resume(returning: true) }
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
