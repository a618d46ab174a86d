import DequeModule

/// Which events a free lane sends next (pure: no I/O, no clock). Events wait per channel; a
/// channel has at most one batch out at a time, so its events leave in order, while other
/// channels' batches go out on the other lanes. A free lane takes the channel that has waited
/// longest, not a lane chosen by the channel's name: a request leaves as soon as any lane is free,
/// with what queued meanwhile, and `n` lanes keep `n` requests in flight over `n` channels or more
/// (docs/contract.md `[bridge.pusher] api_lanes`).
public struct LaneSchedule<Element> {
    /// One batch for a lane, and the channels it holds until ``finished(_:)``.
    public struct Batch {
        /// The events, oldest first per channel.
        public var elements: [Element] = []
        /// The channels in the batch, each in flight until the batch is finished.
        public var channels: [String] = []

        /// An empty batch (what a lane gets once the queue is finished).
        public init() {}
    }

    /// Events not handed to a lane yet, per channel, oldest first, each with its size.
    private var waiting: [String: Deque<(element: Element, bytes: Int)>] = [:]
    /// Channels with events waiting and no batch out, in the order they became ready.
    private var ready: Deque<String> = []
    /// Channels with a batch out.
    private var inFlight: Set<String> = []
    /// How many events wait (handed-out ones no longer count).
    public private(set) var count = 0
    /// The waiting events' sizes (as given to ``arrived(_:channel:bytes:)``) added up.
    public private(set) var bytes = 0
    /// At most this many events wait; ``hasRoom`` is false beyond.
    public let capacity: Int
    /// Once the waiting events' sizes reach this, ``hasRoom`` is false (one event always fits).
    public let byteCapacity: Int

    /// An empty schedule holding at most `capacity` waiting events and, as far as whole events
    /// allow, `byteCapacity` bytes of them.
    public init(capacity: Int, byteCapacity: Int = .max) {
        self.capacity = max(1, capacity)
        self.byteCapacity = max(1, byteCapacity)
    }

    /// Whether another event may be added.
    public var hasRoom: Bool { count < capacity && bytes < byteCapacity }

    /// Whether a lane would get a batch now.
    public var hasReady: Bool { !ready.isEmpty }

    /// An event of `bytes` for `channel` arrived; returns true when its channel became ready (a
    /// lane can take it).
    @discardableResult
    public mutating func arrived(_ element: Element, channel: String, bytes: Int = 0) -> Bool {
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
    public mutating func nextBatch(max: Int) -> Batch {
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
        releaseStorageIfDrained()
        return batch
    }

    /// A batch was sent (or given up): its channels may go out again; returns how many became ready.
    @discardableResult
    public mutating func finished(_ batch: Batch) -> Int {
        var readied = 0
        for channel in batch.channels {
            inFlight.remove(channel)
            if waiting[channel] != nil {
                ready.append(channel)
                readied += 1
            }
        }
        releaseStorageIfDrained()
        return readied
    }

    /// The channels the storage holds room for without growing (tests: a drained burst over many
    /// channels gives its storage back).
    public var storageCapacity: Int { Swift.max(waiting.capacity, inFlight.capacity) }

    /// The channels whose storage is kept when the schedule empties; a larger burst's is released
    /// (a dictionary keeps the capacity of its largest size otherwise).
    public static var retainedChannels: Int { 64 }

    private mutating func releaseStorageIfDrained() {
        if waiting.isEmpty, waiting.capacity > Self.retainedChannels {
            waiting = [:]
            ready = []
        }
        if inFlight.isEmpty, inFlight.capacity > Self.retainedChannels { inFlight = [] }
    }
}

extension LaneSchedule: Sendable where Element: Sendable {}
extension LaneSchedule.Batch: Sendable where Element: Sendable {}
