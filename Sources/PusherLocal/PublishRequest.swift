import PusherProtocol

/// One event to publish through the HTTP API (`/events` names many channels; `/batch_events`
/// one per item).
public struct PublishRequest: Sendable, Equatable {
    public var name: String
    public var data: String
    public var channels: [String]
    public var socketID: String?
    public var info: [String]

    public init(name: String, data: String, channels: [String], socketID: String? = nil, info: [String] = []) {
        self.name = name
        self.data = data
        self.channels = channels
        self.socketID = socketID
        self.info = info
    }
}
