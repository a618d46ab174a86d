import Dispatch
import Locking
import Testing

@testable import MosquittoClient

/// The slow-consumer rule, without sockets: a full buffer blocks the producer (the network
/// thread) until there is room, and drops only after the timeout.
@Suite struct MessageBufferTests {
    func message(_ n: Int) -> MQTTMessage {
        MQTTMessage(topic: "t/\(n)", payload: [UInt8(n & 0xFF)])
    }

    @Test func deliversInOrderThenEndsAfterFinish() async {
        let buffer = MessageBuffer(capacity: 10)
        for n in 0..<5 { #expect(buffer.push(message(n), maxWait: .zero)) }
        buffer.finish()
        #expect(!buffer.push(message(99), maxWait: .zero))
        var topics: [String] = []
        for await m in MQTTMessageStream(buffer: buffer) { topics.append(m.topic) }
        #expect(topics == (0..<5).map { "t/\($0)" })
    }

    @Test func burstsComeInOrderUpToTheLimitThenEndAfterFinish() async {
        let buffer = MessageBuffer(capacity: 10)
        for n in 0..<7 { #expect(buffer.push(message(n), maxWait: .zero)) }
        let stream = MQTTMessageStream(buffer: buffer)
        let first = await stream.next(max: 4)
        #expect(first.map(\.topic) == (0..<4).map { "t/\($0)" })
        let second = await stream.next(max: 4)
        #expect(second.map(\.topic) == (4..<7).map { "t/\($0)" })
        buffer.finish()
        let end = await stream.next(max: 4)
        #expect(end.isEmpty)
    }

    /// A drained burst gives its storage back; a small one keeps it (a deque keeps the capacity
    /// of its largest size otherwise; its capacity is not public, so the peak is observed).
    @Test func aDrainedBurstReleasesTheStorage() async {
        let count = MessageBuffer.retainedCapacity * 4
        let buffer = MessageBuffer(capacity: count)
        for n in 0..<count { #expect(buffer.push(message(n), maxWait: .zero)) }
        #expect(buffer.storagePeak == count)
        let stream = MQTTMessageStream(buffer: buffer)
        #expect(await stream.next(max: count).map(\.topic) == (0..<count).map { "t/\($0)" })
        #expect(buffer.storagePeak == 0)
        for n in 0..<3 { #expect(buffer.push(message(n), maxWait: .zero)) }
        #expect(await stream.next(max: 3).count == 3)
        #expect(buffer.storagePeak == 3)
    }

    @Test func fullBufferDropsAfterTheTimeoutAndCounts() {
        let buffer = MessageBuffer(capacity: 2)
        #expect(buffer.push(message(0), maxWait: .zero))
        #expect(buffer.push(message(1), maxWait: .zero))
        let start = ContinuousClock.now
        #expect(!buffer.push(message(2), maxWait: .milliseconds(100)))
        #expect(start.duration(to: .now) >= .milliseconds(100))
        #expect(buffer.droppedCount == 1)
        #expect(buffer.count == 2)
    }

    @Test func fullBufferBlocksTheProducerUntilTheConsumerMakesRoom() async throws {
        let buffer = MessageBuffer(capacity: 1)
        #expect(buffer.push(message(0), maxWait: .zero))
        // A wait no test outlasts: the producer stays blocked until the consumer makes room, however
        // late this task runs (with a 10 s wait and a 100 ms sleep here, a CI rehearsal at load 15
        // starved the sleep past the producer's timeout, and the push was dropped).
        let producer = Producer(pushing: message(1), into: buffer, maxWait: .seconds(3600))
        try await eventually("the producer finds the buffer full and waits") { buffer.producerIsWaiting }
        #expect(producer.pushed == nil)
        var iterator = MQTTMessageStream(buffer: buffer).makeAsyncIterator()
        #expect(await iterator.next()?.topic == "t/0")
        // Bounded, so that a producer never let in fails the test instead of hanging the run.
        try await eventually("the consumer's room lets the producer in") { producer.pushed != nil }
        // Required: a push that was dropped leaves no message to wait for below.
        try #require(producer.pushed == true)
        #expect(await iterator.next()?.topic == "t/1")
        #expect(buffer.droppedCount == 0)
    }

    @Test func waitingConsumerGetsTheNextPushAndCancellationEndsTheWait() async {
        let buffer = MessageBuffer(capacity: 4)
        async let received = MQTTMessageStream(buffer: buffer).makeAsyncIterator().nextValue()
        try? await Task.sleep(for: .milliseconds(20))
        #expect(buffer.push(message(7), maxWait: .zero))
        #expect(await received?.topic == "t/7")

        let waiter = Task { await MQTTMessageStream(buffer: buffer).makeAsyncIterator().nextValue() }
        try? await Task.sleep(for: .milliseconds(20))
        waiter.cancel()
        #expect(await waiter.value == nil)
    }

    @Test func severalConsumersEachGetDifferentMessages() async {
        let buffer = MessageBuffer(capacity: 4)
        let stream = MQTTMessageStream(buffer: buffer)
        async let a = stream.makeAsyncIterator().nextValue()
        async let b = stream.makeAsyncIterator().nextValue()
        try? await Task.sleep(for: .milliseconds(20))
        #expect(buffer.push(message(1), maxWait: .zero))
        #expect(buffer.push(message(2), maxWait: .zero))
        let topics = await [a?.topic, b?.topic].compactMap { $0 }.sorted()
        #expect(topics == ["t/1", "t/2"])
        #expect(buffer.count == 0)
    }

    /// Issue 26: `MQTTClient.applyIncomingFlow(of:)` changes the policy while the network thread
    /// may wait for room. Switched to `pauseReading`, a producer blocked on a full buffer stores the
    /// message instead of dropping it; the policy's version counts the change (the network thread
    /// rebuilds its flow control on it); a policy set again unchanged is no change.
    @Test func aPolicyChangedToPauseReadingReleasesABlockedProducerWithoutADrop() async {
        let buffer = MessageBuffer(capacity: 1)
        #expect(buffer.push(message(0), maxWait: .zero))
        let producer = Producer(pushing: message(1), into: buffer, maxWait: .seconds(30))
        let before = buffer.policy.version
        let pause = MessageBuffer.Policy(overflow: .pauseReading, capacity: 1, byteCapacity: 1 << 20, backpressureTimeout: .seconds(5))
        buffer.setPolicy(pause)
        #expect(await producer.result() == true)
        #expect(buffer.droppedCount == 0)
        #expect(buffer.count == 2)
        #expect(buffer.policy.version == before + 1)
        #expect(buffer.capacity == 1)
        buffer.setPolicy(pause)
        #expect(buffer.policy.version == before + 1)
    }
}

extension MQTTMessageStream.AsyncIterator {
    /// `next()` on a copy, for `async let`.
    func nextValue() async -> MQTTMessage? {
        var copy = self
        return await copy.next()
    }
}

/// A `push` on a thread of its own, as libmosquitto's network thread makes it. A POSIX thread,
/// not `DispatchQueue.global()`: on Linux that shares libdispatch's worker threads with the Swift
/// concurrency pool (2 on a 2-core machine), so a push blocked there for up to its `maxWait`, with
/// one more blocked worker beside it, left no thread for the consumer that was to make room — the
/// push then timed out and the test waited forever for the message it had dropped.
/// Looks at `condition` every 5 ms until it holds; fails naming `what` after 60 s. The condition
/// is looked at before the clock, so a task that ran late still sees what became true.
private func eventually(_ what: String, _ condition: () -> Bool) async throws {
    let deadline = ContinuousClock.now + .seconds(60)
    while !condition() {
        guard ContinuousClock.now < deadline else { throw MessageBufferTestFailure(description: "timed out waiting until \(what)") }
        try await Task.sleep(for: .milliseconds(5))
    }
}

private struct MessageBufferTestFailure: Error, CustomStringConvertible {
    let description: String
}

private final class Producer: Sendable {
    private struct State {
        var outcome: Bool?
        var waiters = WaiterQueue<Bool?>()
    }

    private let state = Locked(State())

    init(pushing message: MQTTMessage, into buffer: MessageBuffer, maxWait: Duration) {
        let started = detachThread(name: "producer") { [state] in
            let ok = buffer.push(message, maxWait: maxWait)
            state.withLock { state in
                state.outcome = ok
                return state.waiters.resumeAll(returning: ok)
            }.resume()
        }
        precondition(started, "no thread for the producer")
    }

    /// What `push` returned; nil while it still waits.
    var pushed: Bool? { state.withLock { $0.outcome } }

    /// Waits (without blocking a thread) until `push` has returned, and returns what it returned.
    func result() async -> Bool? {
        await state.wait(in: { $1(&$0.waiters) }, until: { $0.outcome.map { .some($0) } })
    }
}
