/// One text frame received from a Pusher server, decoded once (docs/pusher-protocol.md §1).
///
/// Every frame is one JSON object with an `event`, usually a `channel`, a `data` that servers
/// send as a JSON-encoded *string* (and sometimes, e.g. in `pusher:error`, as an object), and
/// for client events on presence channels a `user_id` (which may be a number).
public struct PusherFrame: Sendable, Equatable {
    /// The `event` field, e.g. `pusher:connection_established` or an application event name.
    public var event: String
    /// The `channel` field, when present.
    public var channel: String?
    /// The `data` field as text: the contents of a JSON string, or the raw JSON text of any
    /// other value; `nil` when absent or `null`.
    public var data: String?
    /// The `user_id` field normalised to a string (numbers keep their source text).
    public var userID: String?

    /// A frame from its parts (tests and scripted servers build frames this way).
    public init(event: String, channel: String? = nil, data: String? = nil, userID: String? = nil) {
        self.event = event
        self.channel = channel
        self.data = data
        self.userID = userID
    }

    /// Decodes one frame; the only JSON pass over the frame's text.
    public static func parse(_ text: String) throws(PusherFrameError) -> PusherFrame {
        let members: [(key: String, value: JSONScanner.Value)]
        do {
            members = try JSONScanner.objectMembers(of: text)
        } catch {
            throw PusherFrameError(message: "frame is not a JSON object: \(error)")
        }
        var event: String?
        var frame = PusherFrame(event: "")
        for (key, value) in members {
            switch key {
            case "event":
                guard case .string(let name) = value else {
                    throw PusherFrameError(message: "frame field 'event' is not a string")
                }
                event = name
            case "channel":
                switch value {
                case .string(let name): frame.channel = name
                case .null: frame.channel = nil
                case .raw: throw PusherFrameError(message: "frame field 'channel' is not a string")
                }
            case "data":
                frame.data = value.text
            case "user_id":
                frame.userID = value.stringOrNumber
            default:
                continue
            }
        }
        guard let event, !event.isEmpty else { throw PusherFrameError(message: "frame has no 'event' field") }
        frame.event = event
        return frame
    }

    /// The frame as JSON text, with `data` sent as a JSON string (server → client form).
    public var serverText: String {
        JSONText.object([
            ("event", JSONText.quoted(event)),
            ("channel", channel.map(JSONText.quoted)),
            ("data", data.map(JSONText.quoted)),
            ("user_id", userID.map(JSONText.quoted)),
        ])
    }
}

/// Why a received frame could not be decoded.
public struct PusherFrameError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A sentence naming what was wrong.
    public var message: String
    public var description: String { message }
}

/// Frames the client sends (docs/pusher-protocol.md §1: client → server `data` is an object).
enum ClientFrame {
    static let ping = #"{"event":"pusher:ping","data":{}}"#
    static let pong = #"{"event":"pusher:pong","data":{}}"#

    static func subscribe(channel: String, auth: String?, channelData: String?) -> String {
        let data = JSONText.object([
            ("channel", JSONText.quoted(channel)),
            ("auth", auth.map(JSONText.quoted)),
            ("channel_data", channelData.map(JSONText.quoted)),
        ])
        return #"{"event":"pusher:subscribe","data":"# + data + "}"
    }

    /// `pusher:signin` with the auth and the exact `user_data` it signs.
    static func signIn(_ auth: PusherUserAuth) -> String {
        let data = JSONText.object([("auth", JSONText.quoted(auth.auth)), ("user_data", JSONText.quoted(auth.userData))])
        return #"{"event":"pusher:signin","data":"# + data + "}"
    }

    static func unsubscribe(channel: String) -> String {
        #"{"event":"pusher:unsubscribe","data":{"channel":"# + JSONText.quoted(channel) + "}}"
    }

    /// A client event; `data` travels as a JSON string, the form servers forward unchanged.
    static func clientEvent(channel: String, event: String, data: String) -> String {
        JSONText.object([
            ("event", JSONText.quoted(event)),
            ("channel", JSONText.quoted(channel)),
            ("data", JSONText.quoted(data)),
        ])
    }
}
