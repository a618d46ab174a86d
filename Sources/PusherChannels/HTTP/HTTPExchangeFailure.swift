import NIOCore
import NIOHTTP1

/// Why an exchange failed, in words an operator understands.
struct HTTPExchangeFailure: Error, Sendable, CustomStringConvertible {
    /// What happened, e.g. "connection refused to 127.0.0.1:6001".
    let message: String
    /// The peer closed (EOF or reset) before any byte of a response: on a reused keep-alive
    /// connection, the server may have closed it just as the request went out, so one retry on a
    /// fresh connection is safe (the server never read the request, or never acted on it).
    let peerClosedBeforeAnswer: Bool

    /// A failure that no retry will mend.
    init(_ message: String) {
        self.message = message
        self.peerClosedBeforeAnswer = false
    }

    /// The peer closed the connection without answering.
    static let closedBeforeAnswer = HTTPExchangeFailure(
        message: "the server closed the connection before answering", peerClosedBeforeAnswer: true)

    private init(message: String, peerClosedBeforeAnswer: Bool) {
        self.message = message
        self.peerClosedBeforeAnswer = peerClosedBeforeAnswer
    }

    /// The message.
    var description: String { message }
}
