import BridgeCore
import Locking

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
        var consumers = WaiterQueue<Bool>()
        /// Lanes woken that have not taken their batch yet: while one is on its way, no other is
        /// woken (it takes what is ready, whole channels together, and wakes the next if more is).
        var waking = 0
        /// The producer waiting for room.
        var producer = WaiterQueue<Void>()

        /// One waiting lane to wake, unless one is on its way already or nothing is ready.
        mutating func laneToWake() -> WakeUp<Bool> {
            guard waking == 0, schedule.hasReady else { return WakeUp() }
            let lane = consumers.resumeFirst(returning: true)
            waking += lane.count
            return lane
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
            let (step, lane): (PushStep, WakeUp<Bool>) = state.withLock { state in
                if state.finished { return (.finished, WakeUp()) }
                while state.schedule.hasRoom, let (element, channel) = rest.popFirst() {
                    state.schedule.arrived(element, channel: channel, bytes: size(element))
                }
                return (rest.isEmpty ? .pushed : .full, state.laneToWake())
            }
            lane.resume()
            switch step {
            case .pushed:
                return true
            case .finished:
                return false
            case .full:
                if Task.isCancelled { return false }
                // Uninterruptible, as a lane's wait: `finish()` ends it.
                await state.wait(in: { $1(&$0.producer) }, until: { $0.schedule.hasRoom || $0.finished ? () : nil })
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
            typealias Step = (batch: Batch?, producer: WakeUp<Void>, lane: WakeUp<Bool>)
            let (taken, producer, lane): Step = state.withLock { state -> Step in
                if wasWoken { state.waking = Swift.max(0, state.waking - 1) }
                // Once finished, a lane with nothing ready leaves: what waits behind a batch in
                // flight goes out on the lane that holds that batch.
                guard state.schedule.hasReady else { return (state.finished ? Batch() : nil, WakeUp(), WakeUp()) }
                let batch = state.schedule.nextBatch(max: max)
                return (batch, state.producer.resumeAll(returning: ()), state.laneToWake())
            }
            producer.resume()
            lane.resume()
            if let taken { return taken }
            // Resumed with true when woken (it then counts in `waking`); uninterruptible: `finish()`
            // wakes every lane.
            woken = await state.wait(in: { $1(&$0.consumers) }, until: { $0.schedule.hasReady || $0.finished ? false : nil })
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
            return (state.consumers.resumeAll(returning: true), state.producer.resumeAll(returning: ()))
        }
        consumers.resume()
        producer.resume()
    }
}
