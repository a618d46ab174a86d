/// One pending spool record: its sequence number and its opaque payload.
public struct SpoolRecord: Sendable, Equatable {
    /// Position in the spool's total order; consecutive, starting at 1 for a new spool.
    public var sequence: UInt64
    /// The bytes given to ``Spool/append(_:)``.
    public var payload: [UInt8]

    /// A record with this sequence and payload.
    public init(sequence: UInt64, payload: [UInt8]) {
        self.sequence = sequence
        self.payload = payload
    }
}
