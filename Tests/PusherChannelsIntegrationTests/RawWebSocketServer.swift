import Crypto
import Foundation
import Locking
import NIOCore
import NIOPosix

/// A WebSocket "server" that answers every upgrade request with raw bytes: the 101 response and,
/// in the same write, whatever frames the test asks for (a `pusher:error`, a close frame), then
/// ends the connection as asked. It plays a server that refuses at once, as hosted Pusher does
/// (4001/4003/4004 in the first frames), with nothing in between that a client could wait for.
///
/// With `pausing`, the client's event loop is held (``EventLoopPause``) from the moment the request
/// has arrived until the answer and the FIN are in the client's socket buffer, so the client reads
/// the 101, the frames and the end of input in one go: the case that used to lose the close.
final class RawWebSocketServer: Sendable {
    /// How the server ends the connection after its answer.
    enum Ending: Sendable {
        /// Half-closes (FIN), as Hummingbird's WebSocket server does right after its close frame.
        case halfClose
        /// Closes the socket.
        case close
        /// Keeps the connection open until the client closes it.
        case keepOpen
    }

    /// What the server sends after the 101 response.
    let frames: [[UInt8]]
    let ending: Ending
    /// The 101 and each frame in a write of its own, one right after the other (else all in one).
    let separateWrites: Bool
    let pausing: EventLoopPause?
    /// The response head (blank line included) for the request's `Sec-WebSocket-Key`.
    let head: @Sendable (String) -> String
    private let requests = Locked<[String]>([])

    init(
        frames: [[UInt8]], ending: Ending, separateWrites: Bool = false, pausing: EventLoopPause? = nil,
        head: @escaping @Sendable (String) -> String = RawWebSocketServer.switchingProtocols
    ) {
        self.head = head
        self.frames = frames
        self.ending = ending
        self.separateWrites = separateWrites
        self.pausing = pausing
    }

    /// Upgrade requests answered so far.
    var answered: Int { requests.withLock { $0.count } }

    /// Runs `body` with the server listening on 127.0.0.1; returns its port to `body`.
    func run<T: Sendable>(_ body: (Int) async throws -> T) async throws -> T {
        let listener = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { [self] channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(RawUpgradeAnswerHandler(server: self))
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        do {
            let result = try await body(listener.localAddress?.port ?? 0)
            try? await listener.close()
            return result
        } catch {
            try? await listener.close()
            throw error
        }
    }

    fileprivate func record(_ head: String) { requests.withLock { $0.append(head) } }

    // MARK: frames

    /// A server frame (unmasked): FIN set, `opcode`, `payload`.
    static func frame(opcode: UInt8, payload: [UInt8]) -> [UInt8] {
        var bytes: [UInt8] = [0x80 | opcode]
        if payload.count < 126 {
            bytes.append(UInt8(payload.count))
        } else {
            bytes.append(126)
            bytes += [UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        }
        return bytes + payload
    }

    /// A text frame.
    static func text(_ text: String) -> [UInt8] { frame(opcode: 0x1, payload: Array(text.utf8)) }

    /// A close frame with `code` and `reason`.
    static func close(_ code: UInt16, _ reason: String) -> [UInt8] {
        frame(opcode: 0x8, payload: [UInt8(code >> 8), UInt8(code & 0xFF)] + Array(reason.utf8))
    }

    /// A correct 101 response head for `key`.
    @Sendable static func switchingProtocols(_ key: String) -> String {
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: \(accept(key))\r\n\r\n"
    }

    /// `Sec-WebSocket-Accept` for `key` (RFC 6455 §4.2.2).
    static func accept(_ key: String) -> String {
        Data(Insecure.SHA1.hash(data: Data((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").utf8))).base64EncodedString()
    }
}

/// Reads the upgrade request's head and answers it as the server says.
private final class RawUpgradeAnswerHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    let server: RawWebSocketServer
    var pending = ""
    var answered = false

    init(server: RawWebSocketServer) { self.server = server }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !answered else { return }  // The client's close reply: not needed.
        pending += String(buffer: unwrapInboundIn(data))
        guard let end = pending.range(of: "\r\n\r\n") else { return }
        answered = true
        let head = String(pending[..<end.lowerBound])
        server.record(head)
        let key =
            head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("sec-websocket-key:") }
            .map { $0.dropFirst("sec-websocket-key:".count).trimmingCharacters(in: .whitespaces) } ?? ""
        let response = Array(server.head(key).utf8)
        let writes = server.separateWrites ? [response] + server.frames : [server.frames.reduce(response, +)]
        let buffers = writes.map { context.channel.allocator.buffer(bytes: $0) }
        let ending = server.ending
        let channel = context.channel
        let send: @Sendable () -> EventLoopFuture<Void> = {
            // Each write flushed on its own (one syscall each), all in this one event-loop turn.
            let written = EventLoopFuture.andAllSucceed(buffers.map { channel.writeAndFlush($0) }, on: channel.eventLoop)
            switch ending {
            case .halfClose:
                return written.flatMap { channel.close(mode: .output) }
            case .close:
                return written.flatMap { channel.close() }
            case .keepOpen:
                return written
            }
        }
        guard let pause = server.pausing else {
            send().whenComplete { _ in }
            return
        }
        pause.whileHeld(on: context.eventLoop) { send() }
    }
}

/// Holds one event loop (the client's) while the server sends, so the client reads whatever the
/// server sent in one go when it resumes, the way a loaded machine schedules it — here every time.
final class EventLoopPause: Sendable {
    /// The loop to hold: the client's only loop (a one-thread group of the test's own).
    let group: MultiThreadedEventLoopGroup
    private let released = DispatchSemaphore(value: 0)

    init() { group = MultiThreadedEventLoopGroup(numberOfThreads: 1) }

    /// Blocks the client's loop, runs `send` on `serverLoop` once it is blocked, and lets the client's
    /// loop go when what `send` wrote (and the FIN) has left the server.
    func whileHeld(on serverLoop: any EventLoop, _ send: @escaping @Sendable () -> EventLoopFuture<Void>) {
        let held = serverLoop.makePromise(of: Void.self)
        let released = self.released
        group.next().execute {
            held.succeed()
            released.wait()
        }
        held.futureResult.flatMap { send() }.whenComplete { _ in released.signal() }
    }

    func shutdown() async throws { try await group.shutdownGracefully() }
}
