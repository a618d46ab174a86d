import PusherProtocol

/// One event of a webhook request (docs/pusher-protocol.md §2, "Webhooks"), as Pusher names its fields.
public struct PusherWebhookEvent: Sendable, Equatable {
    /// `name`: one of ``PusherWebhookKind``'s raw values, or a name this version does not know.
    public var name: String
    /// `channel`.
    public var channel: String
    /// `user_id` (`member_added`, `member_removed`, and `client_event` on presence channels).
    public var userID: String?
    /// `event`: the client event's name (`client_event`).
    public var event: String?
    /// `data`: the client event's data (`client_event`), a string; another JSON value is kept as its text.
    public var data: String?
    /// `socket_id`: the sender of a client event.
    public var socketID: String?
    /// `subscription_count` (`subscription_count`).
    public var subscriptionCount: Int?

    /// An event from its parts.
    public init(
        name: String, channel: String, userID: String? = nil, event: String? = nil, data: String? = nil, socketID: String? = nil,
        subscriptionCount: Int? = nil
    ) {
        self.name = name
        self.channel = channel
        self.userID = userID
        self.event = event
        self.data = data
        self.socketID = socketID
        self.subscriptionCount = subscriptionCount
    }

    /// The kind, or `nil` for a name this version does not know (counted and skipped, docs/contract.md §7.2).
    public var kind: PusherWebhookKind? { PusherWebhookKind(rawValue: name) }
}

/// The body of a webhook request: `{"time_ms"?, "events": […]}` (docs/contract.md §7.2).
public struct PusherWebhookBody: Sendable, Equatable {
    /// `time_ms`, when sent.
    public var timeMillis: Int64?
    /// `events`, in order.
    public var events: [PusherWebhookEvent]

    /// A body from its parts.
    public init(timeMillis: Int64? = nil, events: [PusherWebhookEvent]) {
        self.timeMillis = timeMillis
        self.events = events
    }

    /// Reads `bytes` with the project's JSON tokenizer. Refused (the reason is returned): anything
    /// that is not one JSON object with an `events` array of objects, each with a string `name` and
    /// a non-empty string `channel`. Other members are ignored (hosted Pusher may add some).
    public static func parse(_ bytes: some Collection<UInt8>) -> Result<PusherWebhookBody, JSONSyntaxError> {
        do {
            return .success(
                try JSONTokenizer.withTokenizer(over: bytes) { (tokenizer: inout JSONTokenizer) throws(JSONSyntaxError) in
                    try readBody(&tokenizer)
                })
        } catch {
            return .failure(error)
        }
    }

    private static func readBody(_ tokenizer: inout JSONTokenizer) throws(JSONSyntaxError) -> PusherWebhookBody {
        guard try tokenizer.next()?.kind == .beginObject else { throw tokenizer.failure("the body must be a JSON object") }
        var body = PusherWebhookBody(events: [])
        var sawEvents = false
        while let token = try tokenizer.next(), token.kind == .memberName {
            let member = tokenizer.string(of: token)
            guard let value = try tokenizer.next() else { throw tokenizer.failure("unexpected end of input") }
            switch member {
            case "time_ms" where value.kind == .number:
                body.timeMillis = Int64(tokenizer.text(of: value.range))
            case "events":
                guard value.kind == .beginArray else { throw tokenizer.failure("\"events\" must be an array") }
                sawEvents = true
                while let element = try tokenizer.next(), element.kind != .endArray {
                    guard element.kind == .beginObject else { throw tokenizer.failure("each event must be an object") }
                    body.events.append(try readEvent(&tokenizer))
                }
            default:
                _ = try tokenizer.skipValue(startingWith: value)
            }
        }
        try tokenizer.validateDocument()
        guard sawEvents else { throw tokenizer.failure("the body has no \"events\" array") }
        return body
    }

    /// Reads one event object; the tokenizer is just past its `{`.
    private static func readEvent(_ tokenizer: inout JSONTokenizer) throws(JSONSyntaxError) -> PusherWebhookEvent {
        var name: String?
        var channel: String?
        var event = PusherWebhookEvent(name: "", channel: "")
        while let token = try tokenizer.next(), token.kind == .memberName {
            let member = tokenizer.string(of: token)
            guard let value = try tokenizer.next() else { throw tokenizer.failure("unexpected end of input") }
            let range = try tokenizer.skipValue(startingWith: value)
            let text: String? =
                switch value.kind {
                case .string: tokenizer.string(of: value)
                case .null: nil
                default: tokenizer.text(of: range)
                }
            switch member {
            case "name": name = value.kind == .string ? text : nil
            case "channel": channel = value.kind == .string ? text : nil
            // A number is tolerated as a user id (docs/contract.md §5.2).
            case "user_id": event.userID = value.kind == .string || value.kind == .number ? text : nil
            case "event": event.event = value.kind == .string ? text : nil
            case "data": event.data = text
            case "socket_id": event.socketID = value.kind == .string ? text : nil
            case "subscription_count": event.subscriptionCount = value.kind == .number ? text.flatMap { Int($0) } : nil
            default: break
            }
        }
        guard let name else { throw tokenizer.failure("an event has no string \"name\"") }
        guard let channel, !channel.isEmpty else { throw tokenizer.failure("an event has no non-empty string \"channel\"") }
        event.name = name
        event.channel = channel
        return event
    }
}
