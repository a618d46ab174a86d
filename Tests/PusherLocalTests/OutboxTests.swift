import NIOCore
import Testing

@testable import PusherLocal

/// The bounded send queue of one connection.
struct OutboxTests {
    @Test func fullQueueRefusesAndEndsTheStreamAfterWhatIsQueued() async {
        let (stream, outbox) = Outbox.make(limit: 2)
        #expect(outbox.send(.text(ByteBuffer(string: "1"))))
        #expect(outbox.send(.text(ByteBuffer(string: "2"))))
        #expect(outbox.send(.text(ByteBuffer(string: "3"))) == false)
        var received: [String] = []
        for await item in stream {
            if case .text(let buffer) = item { received.append(String(buffer: buffer)) }
        }
        // The writer still sends what was queued, then the stream ends (the connection closes).
        #expect(received == ["1", "2"])
    }
}
