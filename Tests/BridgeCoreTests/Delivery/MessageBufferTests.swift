import Testing

@testable import BridgeCore

@Suite("MessageBuffer: bounded FIFO with counted drops")
struct MessageBufferTests {
    func message(_ id: UInt8, size: Int = 10) -> [UInt8] {
        [id] + [UInt8](repeating: 0, count: max(0, size - 1))
    }

    @Test("FIFO order within the bounds; delivered messages are counted as removed")
    func fifo() {
        var buffer = MessageBuffer<[UInt8]>(limits: .init(maxMessages: 10, maxBytes: 1000), overflow: .dropOldest)
        for id in 1...5 as ClosedRange<UInt8> {
            guard case .stored = buffer.append(message(id)) else {
                Issue.record("message \(id) not stored")
                return
            }
        }
        #expect(buffer.count == 5)
        #expect(buffer.byteCount == 50)
        var order: [UInt8] = []
        while let next = buffer.first {
            order.append(next[0])
            buffer.removeFirst()
        }
        #expect(order == [1, 2, 3, 4, 5])
        let afterEmpty = buffer.removeFirst()
        #expect(afterEmpty == nil)
        #expect(buffer.counters == .init(stored: 5, removed: 5, droppedOldest: 0, droppedNewest: 0, droppedOversize: 0))
        #expect(buffer.byteCount == 0)
    }

    @Test("drop-oldest by count: exactly the overflow is dropped, oldest first")
    func dropOldestByCount() {
        var buffer = MessageBuffer<[UInt8]>(limits: .init(maxMessages: 3, maxBytes: 1000), overflow: .dropOldest)
        var dropped: [UInt8] = []
        for id in 1...10 as ClosedRange<UInt8> {
            switch buffer.append(message(id)) {
            case .stored: break
            case .storedDroppingOldest(let oldest): dropped += oldest.map { $0[0] }
            case .droppedNewest, .droppedOversize: Issue.record("unexpected outcome for \(id)")
            }
        }
        #expect(dropped == [1, 2, 3, 4, 5, 6, 7])
        #expect(buffer.elements.map { $0[0] } == [8, 9, 10])
        #expect(buffer.counters.droppedOldest == 7)
        #expect(buffer.counters.dropped == 7)
        #expect(buffer.counters.stored == 10)
    }

    @Test("drop-oldest by bytes: a big message evicts as many old ones as it needs")
    func dropOldestByBytes() {
        var buffer = MessageBuffer<[UInt8]>(limits: .init(maxMessages: 100, maxBytes: 100), overflow: .dropOldest)
        for id in 1...10 as ClosedRange<UInt8> { _ = buffer.append(message(id, size: 10)) }
        #expect(buffer.byteCount == 100)
        guard case .storedDroppingOldest(let dropped) = buffer.append(message(99, size: 35)) else {
            Issue.record("expected drop-oldest")
            return
        }
        #expect(dropped.map { $0[0] } == [1, 2, 3, 4])
        #expect(buffer.byteCount == 95)
        #expect(buffer.count == 7)
        #expect(buffer.counters.droppedOldest == 4)
    }

    @Test("drop-newest: the buffer keeps what it has and every refused message is counted")
    func dropNewest() {
        var buffer = MessageBuffer<[UInt8]>(limits: .init(maxMessages: 4, maxBytes: 35), overflow: .dropNewest)
        var refused: [UInt8] = []
        for id in 1...9 as ClosedRange<UInt8> {
            if case .droppedNewest(let message) = buffer.append(message(id)) { refused.append(message[0]) }
        }
        // 35 bytes hold three 10-byte messages, although four would fit by count.
        #expect(buffer.elements.map { $0[0] } == [1, 2, 3])
        #expect(refused == [4, 5, 6, 7, 8, 9])
        #expect(buffer.counters.droppedNewest == 6)
        buffer.removeFirst()
        guard case .stored = buffer.append(message(10)) else {
            Issue.record("room was made; the message should be stored")
            return
        }
        #expect(buffer.elements.map { $0[0] } == [2, 3, 10])
    }

    @Test(
        "a message larger than max_bytes is dropped under either policy and counted apart",
        arguments: BufferOverflowPolicy.allCases
    )
    func oversize(policy: BufferOverflowPolicy) {
        var buffer = MessageBuffer<[UInt8]>(limits: .init(maxMessages: 10, maxBytes: 50), overflow: policy)
        _ = buffer.append(message(1))
        guard case .droppedOversize = buffer.append(message(2, size: 51)) else {
            Issue.record("expected oversize drop")
            return
        }
        #expect(buffer.elements.map { $0[0] } == [1], "nothing was evicted for a message that cannot fit")
        #expect(buffer.counters.droppedOversize == 1)
        #expect(buffer.counters.droppedOldest == 0)
        #expect(buffer.counters.droppedNewest == 0)
    }

    @Test("policy names match the config file's spelling")
    func policyNames() {
        #expect(BufferOverflowPolicy(rawValue: "drop-oldest") == .dropOldest)
        #expect(BufferOverflowPolicy(rawValue: "drop-newest") == .dropNewest)
        #expect(BufferOverflowPolicy(rawValue: "drop_oldest") == nil)
    }

    @Test("counters add up under a long random mix of appends and removals", arguments: BufferOverflowPolicy.allCases)
    func countersAddUp(policy: BufferOverflowPolicy) {
        var generator = SystemRandomNumberGenerator()
        var buffer = MessageBuffer<[UInt8]>(limits: .init(maxMessages: 20, maxBytes: 500), overflow: policy)
        var offered = 0
        for _ in 0..<5_000 {
            if Bool.random(using: &generator) {
                offered += 1
                _ = buffer.append(message(1, size: Int.random(in: 0...80, using: &generator)))
            } else {
                buffer.removeFirst()
            }
            #expect(buffer.count <= 20)
            #expect(buffer.byteCount <= 500)
            #expect(buffer.byteCount == buffer.elements.reduce(0) { $0 + $1.count })
        }
        let counters = buffer.counters
        #expect(counters.stored + counters.droppedNewest + counters.droppedOversize == offered)
        #expect(counters.stored == counters.removed + counters.droppedOldest + buffer.count)
    }
}
