import Testing

@testable import MosquittoClient

/// When the network thread stops and resumes reading (`pauseReading`, docs/contract.md §7.6), with a manual clock.
@Suite struct IncomingFlowControlTests {
    let t0 = ContinuousClock.now
    typealias Level = IncomingFlowControl.Level

    @Test func pausesAtTheHighWaterMarkAndResumesAtTheLowOneWithHysteresis() {
        var flow = IncomingFlowControl(capacity: 100, byteCapacity: 1_000)
        #expect(flow.highWater == Level(messages: 100, bytes: 1_000))
        #expect(flow.lowWater == Level(messages: 50, bytes: 500))
        #expect(flow.bufferLevelObserved(Level(messages: 99, bytes: 999), now: t0) == nil)
        #expect(!flow.isPaused && flow.mayReconnect)
        #expect(
            flow.bufferLevelObserved(Level(messages: 100, bytes: 10), now: t0 + .seconds(1)) == .paused(Level(messages: 100, bytes: 10)))
        #expect(flow.isPaused && !flow.mayReconnect)
        #expect(flow.phase == .paused(since: t0 + .seconds(1)))
        // Between the marks nothing changes, in either direction.
        #expect(flow.bufferLevelObserved(Level(messages: 51, bytes: 10), now: t0 + .seconds(2)) == nil)
        #expect(flow.bufferLevelObserved(Level(messages: 150, bytes: 10), now: t0 + .seconds(3)) == nil)
        #expect(flow.isPaused)
        #expect(flow.bufferLevelObserved(Level(messages: 50, bytes: 500), now: t0 + .seconds(31)) == .resumed(after: .seconds(30)))
        #expect(flow.phase == .reading && flow.mayReconnect)
        #expect(flow.bufferLevelObserved(Level(messages: 99, bytes: 0), now: t0 + .seconds(32)) == nil)
    }

    @Test func bytesAloneCanPauseAndBothMustBeLowToResume() {
        var flow = IncomingFlowControl(capacity: 100, byteCapacity: 1_000)
        #expect(flow.bufferLevelObserved(Level(messages: 1, bytes: 1_000), now: t0) == .paused(Level(messages: 1, bytes: 1_000)))
        #expect(flow.bufferLevelObserved(Level(messages: 0, bytes: 501), now: t0 + .seconds(1)) == nil)
        #expect(flow.bufferLevelObserved(Level(messages: 51, bytes: 0), now: t0 + .seconds(1)) == nil)
        #expect(flow.bufferLevelObserved(Level(messages: 0, bytes: 0), now: t0 + .seconds(2)) == .resumed(after: .seconds(2)))
    }

    @Test func nonsenseBoundsAreClampedToOne() {
        var flow = IncomingFlowControl(capacity: 0, byteCapacity: -5)
        #expect(flow.highWater == Level(messages: 1, bytes: 1))
        #expect(flow.lowWater == Level(messages: 0, bytes: 0))
        #expect(flow.bufferLevelObserved(Level(messages: 1, bytes: 0), now: t0) != nil)
        #expect(flow.bufferLevelObserved(Level(messages: 0, bytes: 0), now: t0) == .resumed(after: .zero))
    }

    @Test func appendNeverDropsAndTracksTheLevel() async {
        let buffer = MessageBuffer(capacity: 2)
        for n in 0..<5 { #expect(buffer.append(MQTTMessage(topic: "t/\(n)", payload: [UInt8](repeating: 0, count: 10)))) }
        #expect(buffer.level == (messages: 5, bytes: 50))
        #expect(buffer.droppedCount == 0)
        let burst = await MQTTMessageStream(buffer: buffer).next(max: 3)
        #expect(burst.map(\.topic) == ["t/0", "t/1", "t/2"])
        #expect(buffer.level == (messages: 2, bytes: 20))
        buffer.finish()
        #expect(!buffer.append(MQTTMessage(topic: "late", payload: [])))
    }

    @Test func theConfigurationRefusesAByteBoundBelowOne() {
        var configuration = MQTTConfiguration(host: "h", clientID: "c", messageBufferBytes: 0, incomingOverflow: .pauseReading)
        #expect(configuration.problems.contains("message_buffer_bytes must be at least 1"))
        configuration.messageBufferBytes = 1
        #expect(configuration.problems.isEmpty)
    }
}
