/// Signing and verifying Pusher HTTP API requests (docs/pusher-protocol.md §2, "Signing").
///
/// Every request carries `auth_key`, `auth_timestamp` (unix seconds), `auth_version=1.0`,
/// `body_md5` (when there is a body) and finally `auth_signature`, the hex HMAC-SHA256 of
///
///     METHOD \n PATH \n QUERY
///
/// where QUERY is every parameter except `auth_signature`, keys lower-cased, sorted by key,
/// joined as `k=v` with `&`, and **not** URL-escaped.
public struct RequestSignature: Sendable {
    /// The app key, sent as `auth_key`.
    public var key: String
    /// The app secret; never sent.
    public var secret: String

    public init(key: String, secret: String) {
        self.key = key
        self.secret = secret
    }

    /// The query parameters for a signed request, `auth_signature` last, unescaped.
    ///
    /// - Parameters:
    ///   - params: the request's own query parameters (e.g. `info`, `filter_by_prefix`).
    ///   - body: the request body; `nil` adds no `body_md5`. An empty (non-nil) body adds the MD5
    ///     of the empty string, as pusher-http-python does on GET.
    ///   - timestamp: unix seconds.
    public func signedParameters(
        method: String,
        path: String,
        params: [(String, String)] = [],
        body: [UInt8]?,
        timestamp: Int
    ) -> [(String, String)] {
        var all = params
        all.append(("auth_key", key))
        all.append(("auth_timestamp", String(timestamp)))
        all.append(("auth_version", "1.0"))
        if let body { all.append(("body_md5", md5Hex(body))) }
        let signature = hmacSHA256Hex(
            secret: secret,
            message: Self.stringToSign(method: method, path: path, params: all)
        )
        all.append(("auth_signature", signature))
        return all
    }

    /// `METHOD\nPATH\nQUERY` as Pusher defines it; `auth_signature` is left out if present.
    public static func stringToSign(method: String, path: String, params: [(String, String)]) -> String {
        let query =
            params
            .filter { $0.0.lowercased() != "auth_signature" }
            .map { ($0.0.lowercased(), $0.1) }
            .sorted { $0.0 < $1.0 }
            .map { $0.0 + "=" + $0.1 }
            .joined(separator: "&")
        return method.uppercased() + "\n" + path + "\n" + query
    }

    /// Checks a received request's signature; the server side of ``signedParameters``.
    ///
    /// - Parameters:
    ///   - params: the decoded query parameters as received, `auth_signature` included.
    ///   - body: the raw body (empty when there is none).
    ///   - now: the server's unix time in seconds; `auth_timestamp` must be within `window`.
    /// - Returns: `nil` when the request is authentic, else why not (for a 401 body).
    public func verify(
        method: String,
        path: String,
        params: [(String, String)],
        body: [UInt8],
        now: Int,
        window: Int = 600
    ) -> RequestSignatureFailure? {
        func value(_ name: String) -> String? { params.first { $0.0.lowercased() == name }?.1 }
        guard let receivedKey = value("auth_key") else { return .missing("auth_key") }
        guard receivedKey == key else { return .unknownKey(receivedKey) }
        guard let signature = value("auth_signature") else { return .missing("auth_signature") }
        guard let version = value("auth_version") else { return .missing("auth_version") }
        guard version == "1.0" else { return .unsupportedVersion(version) }
        guard let stamp = value("auth_timestamp") else { return .missing("auth_timestamp") }
        guard let timestamp = Int(stamp) else { return .badTimestamp(stamp) }
        guard abs(timestamp - now) <= window else { return .timestampExpired(timestamp: timestamp, now: now) }
        let receivedMD5 = value("body_md5")
        if !body.isEmpty || receivedMD5 != nil {
            guard let receivedMD5 else { return .missing("body_md5") }
            guard receivedMD5 == md5Hex(body) else { return .bodyMD5Mismatch }
        }
        let expected = hmacSHA256Hex(secret: secret, message: Self.stringToSign(method: method, path: path, params: params))
        guard constantTimeEqual(signature, expected) else { return .signatureMismatch }
        return nil
    }
}

/// Why a request's signature was refused.
public enum RequestSignatureFailure: Error, Sendable, Equatable, CustomStringConvertible {
    case missing(String)
    case unknownKey(String)
    case unsupportedVersion(String)
    case badTimestamp(String)
    case timestampExpired(timestamp: Int, now: Int)
    case bodyMD5Mismatch
    case signatureMismatch

    public var description: String {
        switch self {
        case .missing(let name): "Missing parameter \(name)"
        case .unknownKey(let key): "Unknown auth_key \(key)"
        case .unsupportedVersion(let version): "Unsupported auth_version \(version); expected 1.0"
        case .badTimestamp(let value): "auth_timestamp is not a number: \(value)"
        case .timestampExpired(let timestamp, let now):
            "Timestamp expired: \(timestamp) differs from server time \(now) by more than 600 s"
        case .bodyMD5Mismatch: "body_md5 does not match the body"
        case .signatureMismatch: "Invalid signature: you should have sent HmacSHA256Hex(string_to_sign, secret)"
        }
    }
}
