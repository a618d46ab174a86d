import Logging
import NIOCore
import NIOHTTP1
import NIOSSL
import PusherProtocol

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// One event of a batch trigger (`POST /batch_events`), or the single-channel part of a trigger.
public struct PusherBatchEvent: Sendable, Hashable {
    /// The channel.
    public var channel: String
    /// The event name.
    public var name: String
    /// The event data (sent as a JSON string).
    public var data: String
    /// Exclude this connection from delivery.
    public var socketID: String?
    /// Attributes to return, e.g. `["user_count"]`.
    public var info: [String]

    /// An event from its parts.
    public init(channel: String, name: String, data: String, socketID: String? = nil, info: [String] = []) {
        self.channel = channel
        self.name = name
        self.data = data
        self.socketID = socketID
        self.info = info
    }

    var json: String {
        var bytes: [UInt8] = []
        appendJSON(to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends the event as a `batch_events` member: `{"channel":…,"name":…,"data":…}` with
    /// `socket_id` and `info` when set.
    func appendJSON(to output: inout [UInt8]) {
        output.append(contentsOf: #"{"channel":"#.utf8)
        JSONString.append(channel, to: &output)
        output.append(contentsOf: #","name":"#.utf8)
        JSONString.append(name, to: &output)
        output.append(contentsOf: #","data":"#.utf8)
        JSONString.append(data, to: &output)
        if let socketID {
            output.append(contentsOf: #","socket_id":"#.utf8)
            JSONString.append(socketID, to: &output)
        }
        if !info.isEmpty {
            output.append(contentsOf: #","info":"#.utf8)
            JSONString.append(info.joined(separator: ","), to: &output)
        }
        output.append(UInt8(ascii: "}"))
    }
}
