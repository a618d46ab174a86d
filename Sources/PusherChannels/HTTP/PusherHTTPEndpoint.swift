import NIOCore
import NIOHTTP1

/// Where requests go: one keep-alive pool of connections per endpoint (scheme, host, port and
/// TLS trust). Two endpoints that differ only in their CA file never share a connection.
public struct PusherHTTPEndpoint: Hashable, Sendable, CustomStringConvertible {
    /// Host name or IP address, as in the URL.
    public var host: String
    /// TCP port.
    public var port: Int
    /// HTTPS (TLS with SNI and host name verification) or plain HTTP.
    public var secure: Bool
    /// A PEM file of CA certificates to trust instead of the system roots (HTTPS only).
    public var caFile: String?

    /// An endpoint from its parts; `caFile` is ignored for plain HTTP.
    public init(host: String, port: Int, secure: Bool, caFile: String? = nil) {
        self.host = host
        self.port = port
        self.secure = secure
        self.caFile = secure ? caFile : nil
    }

    /// `host:port` (`[v6]:port`), as error messages name the server.
    public var description: String { "\(bracketedHost):\(port)" }

    /// The `Host` header: the port only when it is not the scheme's default.
    var hostHeader: String { port == (secure ? 443 : 80) ? bracketedHost : description }

    /// The host, an IPv6 address in brackets as in a URL.
    private var bracketedHost: String { host.contains(":") ? "[\(host)]" : host }
}

extension PusherHTTPEndpoint {
    /// Splits an `http(s)://host[:port]/path?query` URL into its endpoint and request target;
    /// `nil` for another scheme, user info, an empty host or a bad port.
    static func split(url: String) -> (endpoint: PusherHTTPEndpoint, target: String)? {
        let secure: Bool
        let rest: Substring
        if url.lowercased().hasPrefix("https://") {
            (secure, rest) = (true, url.dropFirst("https://".count))
        } else if url.lowercased().hasPrefix("http://") {
            (secure, rest) = (false, url.dropFirst("http://".count))
        } else {
            return nil
        }
        let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        var target = String(rest[authorityEnd...].prefix { $0 != "#" })
        if !target.hasPrefix("/") { target = "/" + target }
        guard !authority.contains("@") else { return nil }
        let host: Substring
        var portText: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { return nil }
            host = authority[authority.index(after: authority.startIndex)..<close]
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { return nil }
                portText = after.dropFirst()
            }
        } else if let colon = authority.lastIndex(of: ":") {
            host = authority[..<colon]
            portText = authority[authority.index(after: colon)...]
        } else {
            host = authority
        }
        var port = secure ? 443 : 80
        if let portText {
            guard let number = Int(portText), (1...65535).contains(number) else { return nil }
            port = number
        }
        guard !host.isEmpty else { return nil }
        return (PusherHTTPEndpoint(host: String(host), port: port, secure: secure), target)
    }
}
