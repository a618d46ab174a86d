import PusherProtocol

/// The channels a prefix rule's discovery holds for the whole group, retained by the member that
/// runs the rule's discovery (docs/contract.md §7.4, "discovery"), in parts of at most 64 KB:
/// - part 0, the head, on `<membership_topic>/discovered/<rule>`:
///   `{"rule":"sensors","generation":"9c1f…","parts":3,"channels":["sensor-1",…]}`;
/// - part i (1…parts-1) on `<membership_topic>/discovered/<rule>/<i>`:
///   `{"rule":"sensors","generation":"9c1f…","part":i,"channels":[…]}`.
///
/// `generation` is a hash of the whole list: a reader takes the list once it holds the head and
/// every part the head counts, all of the head's generation (``ClusterDiscoveredAssembly``), and
/// until then keeps the list it had. The publisher writes parts 1… before the head, then deletes
/// (zero-length retained) the parts of a longer list that the new one no longer uses. Every
/// member wants these channels held; the retained list outlives its sender, so a new owner starts from it.
public struct ClusterDiscoveredList: Sendable, Equatable {
    /// The rule's name (`presence:<prefix>` for a presence mirror with `channel_prefix`).
    public var rule: String
    /// The hash of the whole list this part belongs to (16 hex digits).
    public var generation: String
    /// This part's number: 0 for the head.
    public var part: Int
    /// How many parts the list has (said by the head; 0 in the other parts).
    public var parts: Int
    /// This part's channels, sorted.
    public var channels: [String]

    public init(rule: String, generation: String, part: Int, parts: Int, channels: [String]) {
        self.rule = rule
        self.generation = generation
        self.part = part
        self.parts = parts
        self.channels = channels
    }

    /// A list in one part (tests, and small lists).
    public init(rule: String, channels: [String]) {
        self.init(rule: rule, generation: Self.generation(of: channels), part: 0, parts: 1, channels: channels)
    }

    /// The JSON payload.
    public var payload: [UInt8] {
        var output = Array("{\"rule\":\(JSONString.quoted(rule)),\"generation\":\(JSONString.quoted(generation)),".utf8)
        output.append(contentsOf: Array((part == 0 ? "\"parts\":\(parts)," : "\"part\":\(part),").utf8))
        ClusterPayload.appendList("channels", channels, to: &output)
        output.append(UInt8(ascii: "}"))
        return output
    }

    /// Reads a payload received on part `part` of `rule`'s discovered topics; nil when it is not
    /// that part of that rule's list.
    public init?(payload: some Collection<UInt8>, rule: String, part: Int = 0) {
        guard let fields = ClusterPayload.fields(of: payload), fields.strings["rule"] == rule,
            let generation = fields.strings["generation"], !generation.isEmpty, let channels = fields.stringArrays["channels"]
        else { return nil }
        if part == 0 {
            guard let parts = fields.numbers["parts"].flatMap({ Int($0) }), parts >= 1, parts <= ClusterDiscoveredList.maxParts else {
                return nil
            }
            self.init(rule: rule, generation: generation, part: 0, parts: parts, channels: channels)
        } else {
            guard fields.numbers["part"].flatMap({ Int($0) }) == part else { return nil }
            self.init(rule: rule, generation: generation, part: part, parts: 0, channels: channels)
        }
    }

    /// The most parts a list may have (a topic level `1`…`9999`).
    public static let maxParts = 9999

    /// `channels` (sorted here) as the parts to publish, each at most 64 KB, part 0 first.
    public static func parts(rule: String, channels: some Collection<String>) -> [ClusterDiscoveredList] {
        let sorted = channels.sorted()
        let generation = generation(of: sorted)
        let overhead =
            "{\"rule\":\(JSONString.quoted(rule)),\"generation\":\"\(generation)\",\"parts\":9999,\"channels\":[]}".utf8.count
        let runs = ClusterPayload.chunks(sorted, budget: ClusterPayload.maxBytes - overhead)
        return runs.enumerated().map { index, run in
            ClusterDiscoveredList(
                rule: rule, generation: generation, part: index, parts: index == 0 ? runs.count : 0, channels: Array(run))
        }
    }

    /// The generation of a sorted list: FNV-1a 64 over the names, each followed by a 0xFF byte
    /// (never part of UTF-8), as 16 hex digits.
    public static func generation(of sorted: [String]) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for channel in sorted {
            for byte in channel.utf8 {
                hash ^= UInt64(byte)
                hash &*= 0x0000_0100_0000_01b3
            }
            hash ^= 0xFF
            hash &*= 0x0000_0100_0000_01b3
        }
        let hex = String(hash, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}

/// What a member has received of one rule's retained discovered list: the parts by number. The
/// list is complete when the head and every part it counts are there with its generation.
public struct ClusterDiscoveredAssembly: Sendable, Equatable {
    var parts: [Int: ClusterDiscoveredList] = [:]
    /// The generation of the list ``takeNewList()`` last returned ("" for none: a deleted head).
    var taken: String?

    public init() {}

    /// Part `part` arrived (nil: it was deleted, a zero-length retained message).
    public mutating func received(part: Int, _ list: ClusterDiscoveredList?) {
        parts[part] = list
    }

    /// The whole list when complete: the channels of every part, in order. A deleted head means
    /// no list (empty); nil while parts of another generation, or missing, leave it incomplete.
    public var channels: [String]? {
        guard let head = parts[0] else { return [] }
        var channels = head.channels
        for index in 1..<max(head.parts, 1) {
            guard let part = parts[index], part.generation == head.generation else { return nil }
            channels += part.channels
        }
        return channels
    }

    /// The whole list (as ``channels``) when it is complete and not the one returned last time;
    /// nil otherwise. A reader gets each generation once, without joining and comparing 100,000
    /// names per part that arrives (a member back with a kept session read dozens of lists' parts).
    public mutating func takeNewList() -> [String]? {
        let generation = parts[0]?.generation ?? ""
        guard generation != taken, let channels else { return nil }
        taken = generation
        return channels
    }

    /// The part numbers beyond the head's count that are still retained: what a publisher of a
    /// list of `count` parts deletes.
    public func surplusParts(keeping count: Int) -> [Int] {
        parts.keys.filter { $0 >= count }.sorted()
    }
}
