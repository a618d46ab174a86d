/// Pairs each publish handed to the MQTT client with its completion, whichever arrives first.
///
/// The client returns a publish id from `send`, and reports the broker's acknowledgement on
/// another task. A QoS 0 publish completes as soon as it is written, which can be before `send`
/// has returned its id to the sender: that completion is kept until the id is known
/// (``sent(_:id:)`` then hands it back at once).
///
/// Pure value type: no locks, no I/O.
public struct PublishCorrelation<ID: Hashable & Sendable, Entry: Sendable, Completion: Sendable>: Sendable {
    // Inlinable (with the storage it touches), so the daemon's calls are specialized for its types.
    @usableFromInline var inFlight: [ID: Entry] = [:]
    @usableFromInline var early: [ID: Completion] = [:]

    /// No publish in flight.
    public init() {}

    /// Publishes sent and not completed yet.
    public var inFlightCount: Int { inFlight.count }

    /// Completions that arrived for ids not (yet) known as sent.
    public var earlyCount: Int { early.count }

    /// `send` returned `id` for `entry`. Returns the completion when it already arrived (the
    /// pair is then done and forgotten); otherwise remembers the entry until it completes.
    @inlinable
    public mutating func sent(_ entry: Entry, id: ID) -> Completion? {
        if let completion = early.removeValue(forKey: id) { return completion }
        inFlight[id] = entry
        return nil
    }

    /// The client reported `completion` for `id`. Returns the entry that was sent under it (the
    /// pair is then done and forgotten); otherwise keeps the completion for ``sent(_:id:)``.
    @inlinable
    public mutating func completed(_ id: ID, with completion: Completion) -> Entry? {
        if let entry = inFlight.removeValue(forKey: id) { return entry }
        early[id] = completion
        return nil
    }
}
