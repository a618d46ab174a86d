import DequeModule

/// A message that knows how many bytes it costs in a ``MessageBuffer``.
public protocol BufferableMessage {
    /// The size counted against ``BufferLimits/maxBytes`` (normally the payload size).
    var bufferedByteCount: Int { get }
}

extension Array: BufferableMessage where Element == UInt8 {
    /// The array's length.
    public var bufferedByteCount: Int { count }
}

/// The outcome of ``MessageBuffer/append(_:)``: a command for the owner, which must count and log
/// every drop (DESIGN §4: "every drop is counted and logged") and, with a spool, acknowledge the
/// dropped records so they are not delivered after all.
public enum BufferAdmission<Message> {
    /// The message is buffered; nothing was dropped.
    case stored
    /// The message is buffered after dropping these oldest messages, oldest first (drop-oldest).
    case storedDroppingOldest([Message])
    /// The buffer is full and the policy is drop-newest: the incoming message was dropped.
    case droppedNewest(Message)
    /// The message alone is larger than `maxBytes`: no policy can make room, it was dropped.
    case droppedOversize(Message)
}

extension BufferAdmission: Sendable where Message: Sendable {}

/// The bounds of one direction's buffer (DESIGN §4 `[bridge.buffer] max_messages`, `max_bytes`).
public struct BufferLimits: Sendable, Equatable {
    /// Most messages held at once; at least 1.
    public var maxMessages: Int
    /// Most bytes held at once (sum of the messages' byte counts).
    public var maxBytes: Int

    /// Bounds with these values; values below 1 (messages) or 0 (bytes) are raised to them.
    public init(maxMessages: Int, maxBytes: Int) {
        self.maxMessages = max(1, maxMessages)
        self.maxBytes = max(0, maxBytes)
    }
}

/// Running totals of a buffer since it was created, for metrics and logs (DESIGN §4: "every
/// drop is counted and logged").
public struct BufferCounters: Sendable, Equatable {
    /// Messages accepted.
    public var stored = 0
    /// Messages removed after delivery.
    public var removed = 0
    /// Buffered messages dropped to make room (drop-oldest).
    public var droppedOldest = 0
    /// Incoming messages dropped because the buffer was full (drop-newest).
    public var droppedNewest = 0
    /// Incoming messages dropped because they alone exceed `maxBytes` (either policy).
    public var droppedOversize = 0

    /// Totals with these values (all zero by default: nothing stored, removed or dropped yet).
    public init(stored: Int = 0, removed: Int = 0, droppedOldest: Int = 0, droppedNewest: Int = 0, droppedOversize: Int = 0) {
        self.stored = stored
        self.removed = removed
        self.droppedOldest = droppedOldest
        self.droppedNewest = droppedNewest
        self.droppedOversize = droppedOversize
    }

    /// Every drop, whatever the reason.
    public var dropped: Int { droppedOldest + droppedNewest + droppedOversize }
}

/// A bounded FIFO of messages for one bridge direction: at most `maxMessages` messages and
/// `maxBytes` bytes, with a fixed overflow policy and a counter for every drop.
///
/// Pure value type, no I/O, no clock; one per bridge direction, owned by one task. Delivery
/// pattern: look at ``first``, deliver it, and only then ``removeFirst()`` — so a failed
/// delivery leaves the message at the head for the retry.
public struct MessageBuffer<Message: BufferableMessage> {
    /// The bounds (DESIGN §4 `max_messages`, `max_bytes`).
    public typealias Limits = BufferLimits
    /// Running totals since the buffer was created.
    public typealias Counters = BufferCounters

    /// The bounds in force.
    public let limits: Limits
    /// The overflow policy in force.
    public let overflow: BufferOverflowPolicy
    /// Totals since creation.
    public private(set) var counters = Counters()
    /// Bytes currently held.
    public private(set) var byteCount = 0

    private var messages: Deque<Message> = []

    /// An empty buffer.
    public init(limits: Limits, overflow: BufferOverflowPolicy) {
        self.limits = limits
        self.overflow = overflow
    }

    /// Messages currently held.
    public var count: Int { messages.count }
    /// True when nothing is held.
    public var isEmpty: Bool { messages.isEmpty }
    /// The oldest message: the next to deliver.
    public var first: Message? { messages.first }

    /// Offers a message to the buffer; see ``BufferAdmission`` for what the owner must do next.
    public mutating func append(_ message: Message) -> BufferAdmission<Message> {
        let size = message.bufferedByteCount
        if size > limits.maxBytes {
            counters.droppedOversize += 1
            return .droppedOversize(message)
        }
        let fits = messages.count < limits.maxMessages && byteCount + size <= limits.maxBytes
        if fits {
            store(message, size: size)
            return .stored
        }
        switch overflow {
        case .dropNewest:
            counters.droppedNewest += 1
            return .droppedNewest(message)
        case .dropOldest:
            var dropped: [Message] = []
            while messages.count >= limits.maxMessages || byteCount + size > limits.maxBytes,
                let oldest = messages.popFirst()
            {
                byteCount -= oldest.bufferedByteCount
                dropped.append(oldest)
            }
            counters.droppedOldest += dropped.count
            store(message, size: size)
            return .storedDroppingOldest(dropped)
        }
    }

    /// Removes and returns the oldest message (after it was delivered).
    @discardableResult
    public mutating func removeFirst() -> Message? {
        guard let message = messages.popFirst() else { return nil }
        byteCount -= message.bufferedByteCount
        counters.removed += 1
        return message
    }

    /// The held messages, oldest first.
    public var elements: [Message] { Array(messages) }

    private mutating func store(_ message: Message, size: Int) {
        messages.append(message)
        byteCount += size
        counters.stored += 1
    }
}
