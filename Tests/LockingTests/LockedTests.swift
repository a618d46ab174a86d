import Locking
import Testing

@Suite("Locked")
struct LockedTests {
    /// Many tasks on the cooperative pool increment one counter: every increment must survive,
    /// which only holds if `withLock` excludes the others for the whole read-modify-write.
    @Test func concurrentIncrementsAreNotLost() async {
        let counter = Locked(0)
        let tasks = 8
        let increments = 2_000
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<tasks {
                group.addTask {
                    for _ in 0..<increments { counter.withLock { $0 += 1 } }
                }
            }
        }
        #expect(counter.withLock { $0 } == tasks * increments)
    }

    /// A throwing body passes its typed error out, keeps what it changed before throwing, and
    /// unlocks (the next `withLock` would otherwise deadlock).
    @Test func throwingBodyUnlocksAndKeepsChanges() {
        struct Refused: Error, Equatable {}
        let value = Locked([1, 2])
        #expect(throws: Refused.self) {
            try value.withLock { (items: inout [Int]) throws(Refused) in
                items.append(3)
                throw Refused()
            }
        }
        #expect(value.withLock { $0 } == [1, 2, 3])
    }

    /// Non-Sendable state (a class reference) lives inside and a value computed from it comes out.
    @Test func holdsNonSendableState() {
        final class Box { var count = 0 }
        let boxed = Locked(Box())
        let count = boxed.withLock { box in
            box.count += 5
            return box.count
        }
        #expect(count == 5)
    }

    /// A non-copyable value (like the spool's file handle) is held, changed in place, and
    /// destroyed exactly once when the lock goes away.
    @Test func holdsNonCopyableValueAndDestroysItOnce() {
        let destroyed = Locked(0)
        struct Handle: ~Copyable {
            let destroyed: Locked<Int>
            var writes = 0
            deinit { destroyed.withLock { $0 += 1 } }
        }
        do {
            let handle = Locked(Handle(destroyed: destroyed))
            let writes = handle.withLock { handle in
                handle.writes += 2
                return handle.writes
            }
            #expect(writes == 2)
            #expect(destroyed.withLock { $0 } == 0)
        }
        #expect(destroyed.withLock { $0 } == 1)
    }
}
