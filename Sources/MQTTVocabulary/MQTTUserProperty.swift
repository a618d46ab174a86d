/// One MQTT 5 user property (a name/value pair; names may repeat).
public struct MQTTUserProperty: Sendable, Hashable {
    /// The property's name.
    public var name: String
    /// The property's value.
    public var value: String

    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }
}
