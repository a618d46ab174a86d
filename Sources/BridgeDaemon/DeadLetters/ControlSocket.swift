import BridgeCore
import Locking
import Logging
import ServiceLifecycle

/// The daemon's Unix control socket (docs/contract.md §8.3): one request line per connection
/// (``ControlRequest``), one JSON line back. A thread of its own accepts and reads (with a 5 s
/// read timeout, so a silent client cannot hold it); the requests are carried out by tasks, so a
/// long redrive does not keep the next request waiting. It never keeps the daemon from running:
/// a socket that cannot be served is one log line, and redrive is unavailable.
struct ControlSocket: Service {
    let path: String
    let logger: Logger
    let handle: @Sendable (ControlRequest) async -> String

    /// A request read from a client, with the connection to answer on.
    private struct Incoming: Sendable {
        var fd: CInt
        var line: [UInt8]
    }

    func run() async throws {
        let listener: CInt
        do {
            listener = try ControlSocketIO.listen(path: path)
        } catch {
            logger.warning("control socket unavailable: dead-letters redrive cannot reach this daemon", metadata: ["error": "\(error)"])
            // A service that returns ends the group: wait for its shutdown instead.
            try? await gracefulShutdown()
            return
        }
        let incoming = AsyncStream.makeStream(of: Incoming.self)
        let continuation = incoming.continuation
        let started = detachThread(name: "control-socket") {
            while let client = ControlSocketIO.accept(listener) {
                ControlSocketIO.setReadTimeout(client, seconds: 5)
                guard let line = ControlSocketIO.readLine(client, limit: ControlRequest.maxBytes) else {
                    ControlSocketIO.close(client)
                    continue
                }
                if case .terminated = continuation.yield(Incoming(fd: client, line: line)) { ControlSocketIO.close(client) }
            }
            continuation.finish()
        }
        guard started else {
            ControlSocketIO.close(listener)
            logger.warning("control socket unavailable: no thread for it", metadata: ["path": "\(path)"])
            try? await gracefulShutdown()
            return
        }
        logger.info("control socket listening", metadata: ["path": "\(path)"])
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                // The group's graceful shutdown (or cancellation) ends the accept thread.
                try? await gracefulShutdown()
                ControlSocketIO.stopAccepting(listener)
            }
            for await request in incoming.stream {
                group.addTask {
                    let reply: String
                    switch ControlRequest.parse(request.line) {
                    case .success(let parsed): reply = await handle(parsed)
                    case .failure(let error): reply = ControlReply.error(error.message)
                    }
                    ControlSocketIO.writeAll(request.fd, Array(reply.utf8))
                    ControlSocketIO.close(request.fd)
                }
            }
            group.cancelAll()
        }
        ControlSocketIO.close(listener)
        ControlSocketIO.remove(path)
        // The accept loop can also end on its own (accept failed): the daemon goes on without it.
        try? await gracefulShutdown()
    }
}

/// The control socket's replies: one line of JSON.
enum ControlReply {
    static func error(_ message: String) -> String {
        var out: [UInt8] = Array("{\"ok\":false,\"error\":".utf8)
        JSONText.appendString(message, to: &out)
        out.append(contentsOf: Array("}\n".utf8))
        return String(decoding: out, as: UTF8.self)
    }

    static func redrive(_ report: RedriveReport) -> String {
        var out: [UInt8] = Array(
            ("{\"ok\":true,\"delivered\":\(report.delivered),\"dead_lettered\":\(report.deadLettered),"
                + "\"unmatched\":\(report.unmatched),\"unsettled\":\(report.unsettled),\"busy\":\(report.busy),\"missing\":[").utf8)
        for (index, id) in report.missing.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            JSONText.appendString(id, to: &out)
        }
        out.append(contentsOf: Array("]}\n".utf8))
        return String(decoding: out, as: UTF8.self)
    }

    static func purge(removed: Int, missing: [String], busy: Int) -> String {
        var out: [UInt8] = Array("{\"ok\":true,\"purged\":\(removed),\"busy\":\(busy),\"missing\":[".utf8)
        for (index, id) in missing.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            JSONText.appendString(id, to: &out)
        }
        out.append(contentsOf: Array("]}\n".utf8))
        return String(decoding: out, as: UTF8.self)
    }
}
