import BridgeCore
import Locking
import Logging

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

extension LogFormat {
    /// Bootstraps swift-log once per process with this format (`[daemon] log_format`) and level.
    public func bootstrap(level: Logger.Level) {
        LoggingSystem.bootstrap { label in
            var handler = LineLogHandler(label: label, format: self)
            handler.logLevel = level
            return handler
        }
    }
}

extension LogLevelSetting {
    /// The swift-log level.
    public var loggerLevel: Logger.Level {
        switch self {
        case .trace: .trace
        case .debug: .debug
        case .info: .info
        case .notice: .notice
        case .warning: .warning
        case .error: .error
        }
    }
}

/// Writes one line per log event to stderr, as text or JSON, under a lock so lines never interleave.
public struct LineLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .info
    public let label: String
    public let format: LogFormat

    public init(label: String, format: LogFormat) {
        self.label = label
        self.format = format
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = metadata
        if let extra = event.metadata { merged.merge(extra) { _, new in new } }
        let line = Self.render(
            format: format, timestamp: Self.timestamp(), level: event.level, label: label,
            message: event.message.description, metadata: merged
        )
        // One write(2) per line to fd 2 (unbuffered); the lock keeps lines whole across threads.
        let bytes = Array(line.utf8)
        stderrLock.withLock { _ in
            bytes.withUnsafeBytes { raw in
                var offset = 0
                while offset < raw.count {
                    let n = write(2, raw.baseAddress! + offset, raw.count - offset)
                    if n <= 0 { break }
                    offset += n
                }
            }
        }
    }

    /// Renders one line (ending in `\n`); pure, for tests.
    public static func render(
        format: LogFormat,
        timestamp: String,
        level: Logger.Level,
        label: String,
        message: String,
        metadata: Logger.Metadata
    ) -> String {
        let keys = metadata.keys.sorted()
        switch format {
        case .text:
            var line = "\(timestamp) \(level) \(label): \(message)"
            if !keys.isEmpty {
                line += " [" + keys.map { "\($0)=\(metadata[$0]!)" }.joined(separator: " ") + "]"
            }
            return line + "\n"
        case .json:
            var line = "{\"ts\":\(JSONText.quoted(timestamp)),\"level\":\(JSONText.quoted(level.rawValue)),"
            line += "\"label\":\(JSONText.quoted(label)),\"msg\":\(JSONText.quoted(message))"
            for key in keys where !["ts", "level", "label", "msg"].contains(key) {
                line += ",\(JSONText.quoted(key)):\(JSONText.quoted("\(metadata[key]!)"))"
            }
            return line + "}\n"
        }
    }

    /// RFC 3339 UTC with milliseconds.
    static func timestamp() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var seconds = now.tv_sec
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func pad(_ value: Int32, _ width: Int) -> String {
            let digits = String(value)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))T"
            + "\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2)).\(pad(Int32(now.tv_nsec / 1_000_000), 3))Z"
    }
}

private let stderrLock = Locked<Void>(())
