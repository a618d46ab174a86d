import PusherProtocol

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// What an authorizer is asked: may `socketID` subscribe to `channelName`?
public struct PusherAuthRequest: Sendable, Hashable {
    /// The current connection's socket id (auth is only valid for it).
    public var socketID: String
    /// The private, presence or encrypted channel.
    public var channelName: String

    /// A request from its parts.
    public init(socketID: String, channelName: String) {
        self.socketID = socketID
        self.channelName = channelName
    }

    /// The form body an auth endpoint receives: `socket_id=…&channel_name=…`.
    public var formBody: String {
        "socket_id=" + Self.formEncode(socketID) + "&channel_name=" + Self.formEncode(channelName)
    }

    /// `s` percent-encoded for a form body or a query: ASCII letters, digits and `-._*` stay, every
    /// other UTF-8 byte becomes `%XX` (upper-case hex).
    static func formEncode(_ s: String) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(s.utf8.count)
        for byte in s.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "*"):
                out.append(byte)
            default:
                out += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
