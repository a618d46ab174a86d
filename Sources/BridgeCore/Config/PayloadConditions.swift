import BridgeVocabulary
import MQTTVocabulary
import PusherProtocol

/// `where`, `throttle` and `on_change` of a rule (docs/contract.md §7.3): which messages it
/// forwards, and how often per target.
public struct PayloadConditions: Sendable, Equatable {
    /// Forward only messages whose payload matches (`where`); nil forwards all.
    public var condition: WhereExpression?
    /// At most one message per target per interval, the latest (`throttle`); nil is off.
    public var throttle: Duration?
    /// Drop a message equal to the last one forwarded for its target (`on_change`).
    public var onChange: Bool
    /// How many targets the rule remembers for `throttle`/`on_change` (`max_targets`).
    public var maxTargets: Int

    /// Nothing filtered, nothing shaped.
    public static let none = PayloadConditions()

    public init(condition: WhereExpression? = nil, throttle: Duration? = nil, onChange: Bool = false, maxTargets: Int = 10_000) {
        self.condition = condition
        self.throttle = throttle
        self.onChange = onChange
        self.maxTargets = maxTargets
    }

    /// Whether `throttle` or `on_change` is set.
    public var shapesRate: Bool { throttle != nil || onChange }
}
