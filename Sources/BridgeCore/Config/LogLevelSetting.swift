import Backoff
import BridgeVocabulary
import MQTTVocabulary

/// `log_level` values (swift-log's levels without `critical`).
public enum LogLevelSetting: String, Sendable, Equatable, CaseIterable {
    /// From most to least verbose; `critical` is not offered (it is for the daemon's own fatal errors).
    case trace, debug, info, notice, warning, error
}
