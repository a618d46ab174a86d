import TestSupport
import Testing

@testable import BridgeCore

@Suite("LoopGuard: MQTT 3.1.1 echo suppression")
struct LoopGuardTests {
    let topic = "dash/prices/new-price"
    let payload = Array(#"{"price":1}"#.utf8)

    @Test("our own publish coming back is an echo; a message we did not publish is not")
    func echoRecognised() {
        var guardian = LoopGuard<TestInstant>(window: .seconds(5))
        guardian.recordPublish(MessageDigest(topic: topic, payload: payload), now: .at(milliseconds: 0))
        let answer1 = guardian.isOwnEcho(
            MessageDigest(topic: topic, payload: Array("other".utf8)),
            now: .at(milliseconds: 3)
        )
        #expect(!answer1)
        let answer2 = guardian.isOwnEcho(
            MessageDigest(topic: topic + "/x", payload: payload),
            now: .at(milliseconds: 3)
        )
        #expect(!answer2)
        let answer3 = guardian.isOwnEcho(MessageDigest(topic: topic, payload: payload), now: .at(milliseconds: 4))
        #expect(answer3)
        #expect(guardian.echoesSuppressed == 1)
    }

    @Test("each recorded publish suppresses exactly one echo: a genuine repeat from elsewhere crosses")
    func oneEchoPerPublish() {
        var guardian = LoopGuard<TestInstant>(window: .seconds(5))
        let digest = MessageDigest(topic: topic, payload: payload)
        guardian.recordPublish(digest, now: .at(milliseconds: 0))
        guardian.recordPublish(digest, now: .at(milliseconds: 1))
        let answer4 = guardian.isOwnEcho(digest, now: .at(milliseconds: 2))
        #expect(answer4)
        let answer5 = guardian.isOwnEcho(digest, now: .at(milliseconds: 3))
        #expect(answer5)
        let answer6 = guardian.isOwnEcho(digest, now: .at(milliseconds: 4))
        #expect(!answer6, "a third copy is someone else's")
    }

    @Test("records expire after the window")
    func windowExpiry() {
        var guardian = LoopGuard<TestInstant>(window: .seconds(2))
        let digest = MessageDigest(topic: topic, payload: payload)
        guardian.recordPublish(digest, now: .at(milliseconds: 0))
        let answer7 = guardian.isOwnEcho(digest, now: .at(milliseconds: 2_000))
        #expect(!answer7, "the window is half-open")
        #expect(guardian.count == 0)
        guardian.recordPublish(digest, now: .at(milliseconds: 2_500))
        let answer8 = guardian.isOwnEcho(digest, now: .at(milliseconds: 4_499))
        #expect(answer8)
    }

    @Test("a used record expires with the oldest deadline, leaving the newer one its full window")
    func consumedRecordsExpireOldestFirst() {
        var guardian = LoopGuard<TestInstant>(window: .seconds(10))
        let digest = MessageDigest(topic: topic, payload: payload)
        guardian.recordPublish(digest, now: .at(milliseconds: 0))
        guardian.recordPublish(digest, now: .at(milliseconds: 8_000))
        let answer9 = guardian.isOwnEcho(digest, now: .at(milliseconds: 8_001))
        #expect(answer9)
        // The first record's deadline (10 s) passes; the second (18 s) must still suppress.
        let answer10 = guardian.isOwnEcho(digest, now: .at(milliseconds: 12_000))
        #expect(answer10)
        let answer11 = guardian.isOwnEcho(digest, now: .at(milliseconds: 12_001))
        #expect(!answer11)
    }

    @Test("memory is bounded: the oldest records are evicted and counted")
    func capacity() {
        var guardian = LoopGuard<TestInstant>(window: .seconds(60), capacity: 100)
        for index in 0..<250 {
            guardian.recordPublish(
                MessageDigest(topic: topic, payload: [UInt8(index % 256), UInt8(index / 256)]),
                now: .at(milliseconds: Int64(index))
            )
        }
        #expect(guardian.count == 100)
        #expect(guardian.evictedBeforeExpiry == 150)
        let answer12 = guardian.isOwnEcho(MessageDigest(topic: topic, payload: [0, 0]), now: .at(milliseconds: 300))
        #expect(!answer12)
        let answer13 = guardian.isOwnEcho(MessageDigest(topic: topic, payload: [249, 0]), now: .at(milliseconds: 300))
        #expect(answer13)
    }

    @Test("digests separate topic and payload boundaries")
    func digestBoundaries() {
        #expect(
            MessageDigest(parts: [Array("ab".utf8), Array("c".utf8)])
                != MessageDigest(parts: [Array("a".utf8), Array("bc".utf8)])
        )
        #expect(MessageDigest(topic: "a", payload: [1]) == MessageDigest(topic: "a", payload: [1]))
        #expect(MessageDigest(topic: "a", payload: [1]).description.count == 32)
    }
}
