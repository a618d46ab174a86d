import Backoff
import BridgeVocabulary
import MQTTVocabulary

/// A validated `bridges.conf` (docs/contract.md §4): the daemon settings and one or more bridges.
///
/// Produced by ``ConfigLoader``; every value here has been checked, defaults are filled in,
/// `${VAR}` references are expanded and `*_file` secrets are read. Plain values: compare two of
/// them with ``ConfigDiff`` on reload.
public struct BridgeConfiguration: Sendable, Equatable {
    /// `[daemon]`.
    public var daemon: DaemonSettings
    /// `[[bridge]]`, in file order.
    public var bridges: [BridgeSettings]

    public init(daemon: DaemonSettings, bridges: [BridgeSettings]) {
        self.daemon = daemon
        self.bridges = bridges
    }

    /// The bridge named `name`.
    public func bridge(named name: String) -> BridgeSettings? {
        bridges.first { $0.name == name }
    }
}
