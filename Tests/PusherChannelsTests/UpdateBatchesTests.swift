import Testing

@testable import PusherChannels

/// `PusherUpdateBatches`: everything that arrived since the last look, in order; ends on finish
/// or when the waiting consumer is cancelled.
@Suite(.timeLimit(.minutes(1))) struct UpdateBatchesTests {
    static func event(_ n: Int) -> PusherUpdate {
        .event(PusherEvent(name: "e", channel: "c", data: "\(n)"))
    }

    @Test func whatArrivedMeanwhileComesAsOneBatchInOrder() async {
        let batches = PusherUpdateBatches()
        for n in 0..<5 { #expect(batches.append(Self.event(n))) }
        #expect(await batches.next() == (0..<5).map(Self.event))
        #expect(batches.append(Self.event(5)))
        #expect(await batches.next() == [Self.event(5)])
    }

    @Test func aWaitingConsumerIsWokenByTheNextUpdate() async {
        let batches = PusherUpdateBatches()
        let consumer = Task { await batches.next() }
        // Whether the consumer is already waiting or not, it gets the update, and only it.
        try? await Task.sleep(for: .milliseconds(20))
        #expect(batches.append(Self.event(1)))
        #expect(await consumer.value == [Self.event(1)])
    }

    @Test func finishHandsOutWhatIsPendingThenEnds() async {
        let batches = PusherUpdateBatches()
        _ = batches.append(Self.event(1))
        batches.finish()
        #expect(!batches.append(Self.event(2)), "nothing is taken after finish")
        #expect(await batches.next() == [Self.event(1)])
        #expect(await batches.next() == nil)
    }

    @Test func finishWakesAWaitingConsumer() async {
        let batches = PusherUpdateBatches()
        let consumer = Task { await batches.next() }
        try? await Task.sleep(for: .milliseconds(20))
        batches.finish()
        #expect(await consumer.value == nil)
    }

    @Test func cancellingTheWaitingConsumerEndsTheBatchesAndTheClientForgetsThem() async {
        let batches = PusherUpdateBatches()
        let consumer = Task { await batches.next() }
        try? await Task.sleep(for: .milliseconds(20))
        consumer.cancel()
        #expect(await consumer.value == nil)
        #expect(!batches.append(Self.event(1)), "append reports the consumer gone")
    }
}
