import Backoff
import BridgeVocabulary
import MQTTVocabulary

/// A `host:port` to listen on.
public struct ListenAddress: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: Int
    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// `host:port` or `[IPv6]:port` as `metrics` and `[daemon.webhooks] listen` hold it (an IPv6
    /// address without brackets is split at its last colon); nil without a port 1…65535.
    public init?(_ text: String) {
        guard let (host, port) = HostPort.parse(text, defaultPort: nil) else { return nil }
        self.init(host: host, port: port)
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// The one reader of `host:port` text in the configuration: listen addresses (a port required)
/// and `[bridge.mqtt] hosts` entries (a default port).
enum HostPort {
    /// `host:port` and `[IPv6]:port`; with a `defaultPort` also `host`, `[IPv6]` and a bare IPv6
    /// address, which take it. Without one, a bare IPv6 address is split at its last colon. Nil for
    /// an empty host, one with a space or `/`, or a port outside 1…65535.
    static func parse(_ text: String, defaultPort: Int?) -> (host: String, port: Int)? {
        var host = Substring(text)
        var port = defaultPort
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { return nil }
            let rest = host[host.index(after: close)...]
            host = host[host.index(after: host.startIndex)..<close]
            if !rest.isEmpty {
                guard rest.hasPrefix(":") else { return nil }
                port = Int(rest.dropFirst())
                if port == nil { return nil }
            }
        } else if let colon = host.lastIndex(of: ":"), defaultPort == nil || host.firstIndex(of: ":") == colon {
            port = Int(host[host.index(after: colon)...])
            if port == nil { return nil }
            host = host[..<colon]
        }
        guard let port, !host.isEmpty, !host.contains(where: { $0 == " " || $0 == "/" }), (1...65535).contains(port) else {
            return nil
        }
        return (String(host), port)
    }
}
