/// What one member knows of another's held channels, from its held messages (``ClusterHeldReport``):
/// the last complete snapshot with the deltas after it, applied in sequence.
///
/// Any hole in the sequence (a message lost by the broker, a QoS 1 redelivery out of order, a
/// receiver that joined mid-stream) makes the set *unknown*: it is kept (``channels``, for a
/// member that dies: what it probably held) but no longer confirms anything (``known``), until
/// the next complete snapshot. Duplicates (a sequence number already seen) are ignored.
struct ClusterHeldView: Sendable {
    /// What a message did.
    enum Outcome: Equatable {
        /// Applied (a snapshot part, or a delta in sequence).
        case applied
        /// A sequence number already seen: ignored.
        case duplicate
        /// A message was lost before this one: the set is unknown until the next snapshot.
        case gap
    }

    /// The incarnation the messages come from.
    let incarnation: String
    /// The channels last known (stale while ``known`` is false).
    private(set) var channels: Set<String> = []
    /// Whether ``channels`` is the member's held set as of its last message.
    private(set) var known = false
    /// The member's Pusher `socket_id` from its last message.
    private(set) var socketID: String?
    /// The sequence number the next message must have (0: none received yet).
    private(set) var nextSequence: UInt64 = 0
    /// A snapshot being received: its first sequence number, its part count, the channels so far.
    private var assembly: (first: UInt64, parts: Int, channels: Set<String>)?
    /// The `held_seq` of the heartbeat before the last: a message the sender had sent a whole
    /// heartbeat interval ago.
    private var claimed: UInt64 = 0

    init(incarnation: String) {
        self.incarnation = incarnation
    }

    /// Applies one message of this incarnation.
    mutating func apply(_ report: ClusterHeldReport) -> Outcome {
        let sequence = report.sequence
        if nextSequence != 0, sequence < nextSequence { return .duplicate }
        let inSequence = sequence == nextSequence
        nextSequence = sequence + 1
        socketID = report.socketID
        switch report.content {
        case .snapshot(let part, let parts, let partChannels):
            if part == 1 {
                if !inSequence { known = false }  // a hole before the snapshot, which heals it
                assembly = (sequence, parts, Set(partChannels))
            } else if inSequence, var current = assembly, current.parts == parts, current.first + UInt64(part - 1) == sequence {
                assembly = nil  // no copy on write while the set grows
                current.channels.formUnion(partChannels)
                assembly = current
            } else {
                return lose()
            }
            if let complete = assembly, part == complete.parts {
                channels = complete.channels
                known = true
                assembly = nil
            }
            return .applied
        case .delta(let added, let removed):
            // Out of sequence, on an unknown set, or inside a snapshot (the sender started over): a hole.
            guard inSequence, known, assembly == nil else { return lose() }
            channels.subtract(removed)
            channels.formUnion(added)
            return .applied
        }
    }

    /// A heartbeat said the last held message sent was `heldSequence`. A message the heartbeat
    /// before claimed that has still not arrived, one interval later, was lost (a heartbeat, QoS 0,
    /// may overtake the QoS 1 message it counts, hence the interval). Returns whether a snapshot
    /// should be asked for: the set has been unknown for at least that interval.
    mutating func heartbeat(heldSequence: UInt64) -> Bool {
        let previous = claimed
        claimed = heldSequence
        guard previous > 0 else { return false }
        if nextSequence <= previous { _ = lose() }
        return !known
    }

    /// A hole: the set is unknown until the next snapshot.
    private mutating func lose() -> Outcome {
        known = false
        assembly = nil
        return .gap
    }
}
