import HummingbirdCore
import Logging
import NIOCore
import NIOEmbedded

/// Sets up one connection of `child`'s kind, and takes one plain HTTP request through it, on an
/// in-memory channel in the calling thread. Call it once, before the server accepts anything.
///
/// Why: the Swift 6.3.1 runtime crashes (SIGSEGV in
/// `isCanonicalStaticallySpecializedGenericMetadata`) when two event loops set up their first
/// connections at the same moment and both instantiate the same generic type metadata for the
/// first time (docs/history/reliability.md, "A crash in the Swift runtime"; the fault rows in
/// Tests/faults/start_burst_rows.py provoke it). Type metadata is instantiated once per process:
/// after this call every type a connection's set-up and its first request need exists and is
/// complete, so concurrent set-ups only read it.
///
/// Nothing here can fail the caller: the channel is in memory, its output is dropped, and it is
/// closed before returning.
public func warmUpConnectionSetup(_ child: some ServerChildChannel) {
    let logger = Logger(label: "warm-up", factory: { _ in SwiftLogNoOpLogHandler() })
    let channel = EmbeddedChannel()
    _ = try? channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 9)).wait()
    _ = child.setup(channel: channel, logger: logger)
    _ = try? channel.writeInbound(ByteBuffer(string: "GET /warm-up HTTP/1.1\r\nHost: localhost\r\n\r\n"))
    channel.embeddedEventLoop.run()
    _ = try? channel.finish(acceptAlreadyClosed: true)
}

/// ``warmUpConnectionSetup(_:)`` for Hummingbird's plain HTTP/1 server (the kind `Application`
/// builds by default).
public func warmUpHTTP1ConnectionSetup() {
    warmUpConnectionSetup(HTTP1Channel(responder: { _, _, _ in }))
}
