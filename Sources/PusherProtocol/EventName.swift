/// Syntax of event names.
public enum EventName {
    /// Why `name` cannot be published as an application event, or `nil` when it can:
    /// non-empty, at most 200 characters, not a protocol name (`pusher:`, `pusher_internal:`).
    public static func problem(with name: String) -> String? {
        if name.isEmpty { return "event name is empty" }
        if name.utf8.count > PusherLimits.eventNameLength {
            return "event name is longer than \(PusherLimits.eventNameLength) characters"
        }
        if isProtocolEvent(name) { return "event names starting with 'pusher:' are reserved" }
        return nil
    }

    /// `pusher:` and `pusher_internal:` events belong to the protocol, not the application.
    public static func isProtocolEvent(_ name: String) -> Bool {
        name.hasUTF8Prefix("pusher:") || name.hasUTF8Prefix("pusher_internal:")
    }

    /// Client events are named `client-*`.
    public static func isClientEvent(_ name: String) -> Bool {
        name.hasUTF8Prefix("client-")
    }
}
