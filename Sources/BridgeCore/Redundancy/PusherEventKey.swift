/// What makes two arrivals of a Pusher event copies of each other, for ``PusherEventMerge``: the
/// event name, its data and its `user_id` (if any), as a 64-bit hash plus the three lengths. The
/// channel is not part of it: the merge keeps one log per channel (docs/pusher-merge.md).
///
/// **Why no bytes are kept.** Two different events are taken for copies only if their lengths
/// agree and their 64-bit SipHash values collide. The merge compares a copy with at most the
/// entries of one channel's window (``PusherEventMerge/Limits/maxEntries``, 1,024 by default), so
/// one comparison wrongs an event with a probability of 2⁻⁶⁴ and one event at most about 2⁻⁵⁴; at
/// 10,000 events a second that is once in tens of millions of years. The hash is Swift's `Hasher`,
/// seeded at random per process, so a publisher cannot craft a collision it can predict. Keeping
/// the bytes to confirm a match would cost the window's whole payload size for that.
///
/// The key only lives inside one process (it is never persisted or sent), so a per-process seed
/// is fine.
public struct PusherEventKey: Sendable, Hashable {
    /// SipHash-1-3 of the name, data and user id (with the process's random seed).
    public var hash: UInt64
    /// Length in UTF-8 bytes of the event name.
    public var nameLength: Int32
    /// Length in UTF-8 bytes of the data; -1 for an event without data.
    public var dataLength: Int32
    /// Length in UTF-8 bytes of the `user_id`; -1 for an event without one.
    public var userIDLength: Int32

    /// A key from its parts (for tests, and for a caller that hashes by itself).
    public init(hash: UInt64, nameLength: Int32, dataLength: Int32, userIDLength: Int32) {
        self.hash = hash
        self.nameLength = nameLength
        self.dataLength = dataLength
        self.userIDLength = userIDLength
    }

    /// The key of an event as received: its name, data exactly as received (the inner string,
    /// docs/pusher-protocol.md §1 "Double encoding") and `user_id`.
    public init(name: String, data: String?, userID: String?) {
        var hasher = Hasher()
        let nameLength = Self.combine(name, into: &hasher)
        let dataLength = data.map { Self.combine($0, into: &hasher) } ?? -1
        let userIDLength = userID.map { Self.combine($0, into: &hasher) } ?? -1
        self.init(
            hash: UInt64(truncatingIfNeeded: hasher.finalize()), nameLength: nameLength, dataLength: dataLength,
            userIDLength: userIDLength)
    }

    /// Feeds `text`'s UTF-8 bytes to `hasher` (without a copy when the string is native) and
    /// returns their count. The lengths in the key keep the boundaries between the three parts.
    private static func combine(_ text: String, into hasher: inout Hasher) -> Int32 {
        var text = text
        return text.withUTF8 { bytes in
            hasher.combine(bytes: UnsafeRawBufferPointer(bytes))
            return Int32(clamping: bytes.count)
        }
    }
}
