import Backoff
import BridgeVocabulary
import MQTTVocabulary

/// `log_format` values.
public enum LogFormat: String, Sendable, Equatable, CaseIterable {
    /// Human-readable lines.
    case text
    /// One JSON object per line.
    case json
}
