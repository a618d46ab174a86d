import TestSupport
import Testing

@testable import BridgeCore

@Suite("DuplicateFilter: bounded redelivery suppression")
struct DuplicateFilterTests {
    func identity(_ topic: String, _ payload: String) -> MessageDigest {
        MessageDigest(parts: [Array("mqtt".utf8), Array(topic.utf8), Array(payload.utf8)])
    }

    @Test("a copy seen on an earlier connection within the window is a redelivery; other messages are not")
    func withinWindow() {
        var filter = DuplicateFilter<TestInstant>(window: .seconds(5))
        filter.record(identity("a", "1"), now: .at(milliseconds: 0))
        filter.record(identity("a", "2"), now: .at(milliseconds: 1))
        filter.record(identity("b", "1"), now: .at(milliseconds: 2))
        filter.startConnection()
        let answer1 = filter.isRedelivery(identity("a", "1"), now: .at(milliseconds: 100))
        #expect(answer1)
        let answer2 = filter.isRedelivery(identity("a", "2"), now: .at(milliseconds: 200))
        #expect(answer2)
        let answer3 = filter.isRedelivery(identity("b", "2"), now: .at(milliseconds: 300))
        #expect(!answer3)
        #expect(filter.duplicatesFound == 2)
    }

    @Test("the window runs from the first sighting; repeats do not extend it")
    func windowNotExtended() {
        var filter = DuplicateFilter<TestInstant>(window: .seconds(5))
        let id = identity("a", "1")
        filter.record(id, now: .at(milliseconds: 0))
        filter.startConnection()
        filter.record(id, now: .at(milliseconds: 4_000))
        filter.startConnection()
        let answer1 = filter.isRedelivery(id, now: .at(milliseconds: 4_999))
        #expect(answer1)
        filter.startConnection()
        let answer2 = filter.isRedelivery(id, now: .at(milliseconds: 5_000))
        #expect(!answer2, "a steadily repeating value is remembered once per window, never forever")
    }

    @Test("bounded by count: the oldest identities are forgotten first, and counted")
    func capacity() {
        var filter = DuplicateFilter<TestInstant>(window: .seconds(60), capacity: 3)
        for payload in ["1", "2", "3", "4"] {
            filter.record(identity("t", payload), now: .at(milliseconds: 0))
        }
        #expect(filter.count == 3)
        #expect(filter.evictedBeforeExpiry == 1)
        filter.startConnection()
        let answer1 = filter.isRedelivery(identity("t", "4"), now: .at(milliseconds: 1))
        #expect(answer1)
        let answer2 = filter.isRedelivery(identity("t", "1"), now: .at(milliseconds: 1))
        #expect(!answer2, "forgotten: the documented blind spot")
    }

    @Test("redelivery: only copies from an earlier connection count, each excuses one repeat")
    func redeliveryAcrossConnections() {
        var filter = DuplicateFilter<TestInstant>(window: .seconds(30))
        let reading = identity("sensors/1/t", "21.5")
        // The same reading twice on one connection: never a redelivery.
        filter.record(reading, now: .at(milliseconds: 0))
        let sameConnection = filter.isRedelivery(reading, now: .at(milliseconds: 1))
        #expect(!sameConnection)
        filter.record(reading, now: .at(milliseconds: 1))
        // After a reconnect the broker resends it once: that copy is a redelivery...
        filter.startConnection()
        let resent = filter.isRedelivery(reading, now: .at(milliseconds: 10))
        #expect(resent)
        // ...and a further identical reading is a new message, not a second redelivery.
        let again = filter.isRedelivery(reading, now: .at(milliseconds: 11))
        #expect(!again)
        let other = filter.isRedelivery(identity("sensors/1/t", "22.0"), now: .at(milliseconds: 12))
        #expect(!other)
        #expect(filter.duplicatesFound == 1)
    }

    @Test("redelivery: an earlier connection's copy older than the window is forgotten")
    func redeliveryWindow() {
        var filter = DuplicateFilter<TestInstant>(window: .seconds(5))
        let message = identity("a", "1")
        filter.record(message, now: .at(milliseconds: 0))
        filter.startConnection()
        let late = filter.isRedelivery(message, now: .at(milliseconds: 5_000))
        #expect(!late)
    }
}
