import NIOCore
import NIOEmbedded
import NIOHTTP1

@testable import PusherChannels

/// Fuzz target for the HTTP API client's connections (issue 16): the bytes a server sends, through
/// the same pipeline a pooled connection has (NIOHTTP1's encoder and decoder, then
/// `HTTPExchangeHandler`), on an `EmbeddedChannel`.
enum HTTPTargets {
    /// Byte 0: bit 0 picks GET or POST, bits 1–6 the size of each read (1…64 bytes), bit 7 a small
    /// body limit (64 bytes) instead of 1 MiB; the rest is what the server sends. A second request
    /// goes out as soon as the first is answered on a connection still open (the pool would reuse
    /// it); then the server closes.
    /// Checks: every request completes (answered or failed, never left hanging) once the connection
    /// has closed; a body is within the limit; a failure has one of the operator messages; a
    /// connection left open after an answer is idle (a reply asking to close closes it).
    static func responses(_ input: Input) -> Int32 {
        guard let control = input.bytes.first else { return 0 }
        let server = input.bytes.dropFirst()
        let readSize = 1 + Int((control >> 1) & 0x3F)
        let limit = control & 0x80 == 0 ? PusherHTTPConnectionPool.maximumBodyBytes : 64
        let channel = EmbeddedChannel()
        do {
            try channel.pipeline.syncOperations.addHTTPClientHandlers(leftOverBytesStrategy: .forwardBytes)
            try channel.pipeline.syncOperations.addHandler(
                HTTPExchangeHandler(server: "127.0.0.1:80", tlsHost: nil, idleTimeout: .seconds(60), maximumBodyBytes: limit))
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 80)).wait()
        } catch {
            violated("the pipeline could not be set up: \(error)")
        }
        let method: HTTPMethod = control & 1 == 0 ? .GET : .POST
        // Bound to the channel's loop: its callbacks run on this thread (an EmbeddedChannel), and
        // the box says so to the compiler, which sees a `@Sendable` closure.
        let box = NIOLoopBoundBox<[Result<PusherHTTPResponse, any Error>?]>([], eventLoop: channel.eventLoop)

        func send() {
            let index = box.value.count
            box.value.append(nil)
            let promise = channel.eventLoop.makePromise(of: PusherHTTPResponse.self)
            promise.futureResult.whenComplete { box.value[index] = $0 }
            let body = method == .POST ? channel.allocator.buffer(string: #"{"batch":[]}"#) : nil
            let exchange = HTTPExchange(
                head: HTTPRequestHead(version: .http1_1, method: method, uri: "/apps/1/batch_events", headers: ["Host": "127.0.0.1"]),
                body: body, deadline: .now() + .seconds(10), timeoutText: "10 s", promise: promise)
            channel.writeAndFlush(exchange, promise: nil)
            while (try? channel.readOutbound(as: ByteBuffer.self)) != nil {}
        }

        send()
        var offset = server.startIndex
        while offset < server.endIndex, channel.isActive {
            let end = min(offset + readSize, server.endIndex)
            do {
                try channel.writeInbound(channel.allocator.buffer(bytes: server[offset..<end]))
            } catch {
                violated("an error escaped the handler: \(error)")
            }
            offset = end
            if box.value.count == 1, case .success? = box.value[0], channel.isActive { send() }
        }
        // Open with the last request answered (a read-until-close body is answered only at the close).
        let openAfterAnswers = channel.isActive && box.value.last.map { $0 != nil } == true
        _ = try? channel.close().wait()
        let results = box.value
        for (index, result) in results.enumerated() {
            switch result {
            case nil:
                violated("request \(index) was never completed")
            case .success(let response)?:
                if response.body.readableBytes > limit { violated("a body of \(response.body.readableBytes) bytes passed the limit") }
                if !(100...999).contains(response.status) { violated("status \(response.status)") }
                if index == results.count - 1, openAfterAnswers, !checkKeptOpen(response) {
                    violated("the connection stayed open after a reply asking to close it")
                }
            case .failure(let error)?:
                guard let failure = error as? HTTPExchangeFailure else { violated("not an HTTPExchangeFailure: \(error)") }
                let known = [
                    "malformed HTTP response: ", "the server closed the connection", "response body over ",
                    "connection to 127.0.0.1:80 failed: ",
                ]
                if !known.contains(where: failure.message.hasPrefix) { violated("unexpected failure message: \(failure.message)") }
            }
        }
        return 0
    }

    /// Whether a connection may stay open after `response`: the first `close` or `keep-alive` token
    /// of `Connection` is not `close` (NIOHTTP1's rule for HTTP/1.1, which the handler follows; an
    /// HTTP/1.0 reply without `keep-alive` is never left open, so it is not checked here).
    private static func checkKeptOpen(_ response: PusherHTTPResponse) -> Bool {
        let tokens = response.headers[canonicalForm: "connection"].map { $0.lowercased() }
        return tokens.first { $0 == "close" || $0 == "keep-alive" } != "close"
    }
}
