/// A map that keeps its entries in the order they were last touched, oldest first: lookup, insert,
/// touch (move to the newest end) and removing the oldest are all O(1). Used by ``RateShaper`` to
/// forget quiet targets without scanning them all.
///
/// A doubly linked list threaded through an array of slots (freed slots are reused) plus a
/// dictionary from key to slot. Pure value type.
struct RecencyList<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    private struct Node: Sendable {
        var key: Key
        var value: Value
        /// The slot touched just before this one (-1: this is the oldest).
        var older: Int
        /// The slot touched just after this one (-1: this is the newest).
        var newer: Int
    }

    private var nodes: [Node?] = []
    private var freeSlots: [Int] = []
    private var slots: [Key: Int] = [:]
    private var oldestSlot = -1
    private var newestSlot = -1

    /// Entries held.
    var count: Int { slots.count }

    /// The value for `key`, if present (looking does not touch it).
    subscript(key: Key) -> Value? {
        guard let slot = slots[key] else { return nil }
        return nodes[slot]?.value
    }

    /// The entry touched longest ago.
    var oldest: (key: Key, value: Value)? {
        guard oldestSlot >= 0, let node = nodes[oldestSlot] else { return nil }
        return (node.key, node.value)
    }

    /// Stores `value` for `key` and makes it the newest entry.
    mutating func touch(_ key: Key, _ value: Value) {
        if let slot = slots[key] {
            unlink(slot)
            nodes[slot]?.value = value
            linkNewest(slot)
            return
        }
        let node = Node(key: key, value: value, older: -1, newer: -1)
        let slot: Int
        if let reused = freeSlots.popLast() {
            slot = reused
            nodes[slot] = node
        } else {
            slot = nodes.count
            nodes.append(node)
        }
        slots[key] = slot
        linkNewest(slot)
    }

    /// Replaces the value for `key` without touching it (nothing happens if `key` is absent).
    mutating func update(_ key: Key, _ value: Value) {
        guard let slot = slots[key] else { return }
        nodes[slot]?.value = value
    }

    /// Removes the entry touched longest ago.
    mutating func removeOldest() {
        guard oldestSlot >= 0, let node = nodes[oldestSlot] else { return }
        let slot = oldestSlot
        unlink(slot)
        nodes[slot] = nil
        slots[node.key] = nil
        freeSlots.append(slot)
    }

    private mutating func unlink(_ slot: Int) {
        guard let node = nodes[slot] else { return }
        if node.older >= 0 { nodes[node.older]?.newer = node.newer } else { oldestSlot = node.newer }
        if node.newer >= 0 { nodes[node.newer]?.older = node.older } else { newestSlot = node.older }
        nodes[slot]?.older = -1
        nodes[slot]?.newer = -1
    }

    private mutating func linkNewest(_ slot: Int) {
        nodes[slot]?.older = newestSlot
        nodes[slot]?.newer = -1
        if newestSlot >= 0 { nodes[newestSlot]?.newer = slot } else { oldestSlot = slot }
        newestSlot = slot
    }
}
