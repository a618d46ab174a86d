/// What changed between two valid configs, for `SIGHUP` reload (docs/contract.md §3: apply the difference
/// without dropping connections that did not change). Bridges are compared by name and by value.
public struct ConfigDiff: Sendable, Equatable {
    /// Bridges whose settings are equal in both: keep them running untouched.
    public var unchanged: [String]
    /// Bridges present in both with different settings: restart them.
    public var changed: [String]
    /// Bridges only in the new config: start them.
    public var added: [String]
    /// Bridges only in the old config: stop them.
    public var removed: [String]
    /// Whether `[daemon]` differs (log level, metrics address, …).
    public var daemonChanged: Bool

    public init(from old: BridgeConfiguration, to new: BridgeConfiguration) {
        var unchanged: [String] = []
        var changed: [String] = []
        var added: [String] = []
        for bridge in new.bridges {
            if let previous = old.bridge(named: bridge.name) {
                if previous == bridge { unchanged.append(bridge.name) } else { changed.append(bridge.name) }
            } else {
                added.append(bridge.name)
            }
        }
        self.unchanged = unchanged
        self.changed = changed
        self.added = added
        self.removed = old.bridges.map(\.name).filter { new.bridge(named: $0) == nil }
        self.daemonChanged = old.daemon != new.daemon
    }

    /// Whether nothing at all changed.
    public var isEmpty: Bool { changed.isEmpty && added.isEmpty && removed.isEmpty && !daemonChanged }
}
