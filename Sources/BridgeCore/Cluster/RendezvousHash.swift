/// Rendezvous (highest random weight) hashing: the owner of a key is the member whose
/// `score(member, key)` is highest. Every member computes the same owner from the same member
/// list without talking to the others, and when a member joins or leaves only the keys it wins
/// or held move (about 1/N of them) — docs/contract.md §7.4, "Pusher → MQTT and mirrors".
///
/// The score must be the same in every process and every version: Swift's `Hasher` is seeded at
/// random per process, so two members would disagree. It is FNV-1a 64 over the member's name, a
/// 0xFF byte (never part of UTF-8, so `("ab","c")` and `("a","bc")` differ) and the key, followed by
/// the 64-bit finalizer of MurmurHash3 (`fmix64`): FNV-1a alone leaves similar short keys
/// (`device-0001`, `device-0002`) with correlated high bits, which skews a highest-score choice.
/// Tests pin values and the balance (10,000 channels over 3 members: each 33 % ± 3 %).
public enum RendezvousHash {
    /// The score of `member` for `key`.
    public static func score(member: String, key: String) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        func mix(_ byte: UInt8) {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01b3
        }
        for byte in member.utf8 { mix(byte) }
        mix(0xFF)
        for byte in key.utf8 { mix(byte) }
        hash ^= hash >> 33
        hash &*= 0xff51_afd7_ed55_8ccd
        hash ^= hash >> 33
        hash &*= 0xc4ce_b9fe_1a85_ec53
        hash ^= hash >> 33
        return hash
    }

    /// The member that owns `key`, or nil when there are none. Equal scores (practically never)
    /// go to the greater name, so the choice never depends on the order of `members`.
    public static func owner(of key: String, among members: some Sequence<String>) -> String? {
        var best: (member: String, score: UInt64)?
        for member in members {
            let score = score(member: member, key: key)
            if let current = best, current.score > score || (current.score == score && current.member > member) { continue }
            best = (member, score)
        }
        return best?.member
    }

    /// Whether `member` owns `key` when the other members are `others` (without `member`): the
    /// same answer as ``owner(of:among:)`` over `others` and `member`, found with fewer scores —
    /// it stops at the first member that beats `member`, after about five of fifty on average (a
    /// member's recomputation over a million channels: 5 million scores rather than 50 million).
    public static func isOwner(_ member: String, of key: String, against others: [String]) -> Bool {
        let own = score(member: member, key: key)
        for other in others {
            let score = score(member: other, key: key)
            if score > own || (score == own && other > member) { return false }
        }
        return true
    }

    /// The key a channel is hashed by: its name.
    public static func channelKey(_ channel: String) -> String { channel }
    /// The key of a discovery rule (docs/contract.md §7.1, run by one member per group). Pusher channel
    /// names never contain ':', so these keys cannot collide with a channel's.
    public static func discoveryKey(rule: String) -> String { "rule:\(rule)" }
    /// The key that picks which survivor writes a dead member's `offline` status.
    public static func statusKey(instance: String) -> String { "status:\(instance)" }
}
