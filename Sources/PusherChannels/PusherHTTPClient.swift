import Logging
import NIOCore
import NIOHTTP1
import NIOSSL
import PusherProtocol

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The signed Pusher HTTP API (docs/pusher-protocol.md §2): trigger, batch trigger, channel queries,
/// and the user calls of `PusherHTTPClient+Users.swift` (send to a user, terminate, sign a sign-in).
///
/// Every request is signed per §2 ("Signing") with `RequestSignature` and validated before it
/// is sent (names, counts, sizes), so a bad request costs no round trip. Connections are kept
/// alive by a ``PusherHTTPConnectionPool`` (pass your own to bound concurrency: its
/// `maximumConnectionsPerHost`). Errors are ``PusherHTTPError``s carrying the HTTP status and
/// whether a retry may help.
public struct PusherHTTPClient: Sendable {
    /// The app id (in `/apps/ID/…`).
    public let appID: String
    /// Base URL, e.g. `https://api-mt1.pusher.com` or `http://127.0.0.1:6001`.
    public let baseURL: String
    /// Largest event `data` accepted before sending (10 KB on hosted Pusher).
    public var maxEventBytes: Int
    /// Per-request timeout.
    public var timeout: Duration
    /// The 32-byte encryption master key: events for `private-encrypted-` channels are sealed
    /// with SHA-256(channel ‖ key) before sending, as Pusher's server libraries do.
    public var encryptionMasterKey: [UInt8]?
    let signature: RequestSignature
    /// Scheme, host, port and trusted CA file (HTTPS only): the pool's key for its connections.
    private let endpoint: PusherHTTPEndpoint
    private let connectionPool: PusherHTTPConnectionPool
    private let logger: Logger

    /// A client for hosted Pusher (`api-CLUSTER.pusher.com`) or a custom server.
    ///
    /// - Parameters:
    ///   - appID: the app's id.
    ///   - key: the app's key.
    ///   - secret: the app's secret, which signs every request.
    ///   - host: `.cluster("mt1")` or `.host("127.0.0.1", port: 6001)`.
    ///   - encrypted: HTTPS (default) or HTTP.
    ///   - caFile: a PEM file with CA certificate(s) to trust instead of the system roots (HTTPS).
    ///   - maxEventBytes: event data larger than this is refused before sending (Pusher's 10 KB by default).
    ///   - timeout: each request's deadline, from waiting for a connection to the answer's end.
    ///   - encryptionMasterKey: the 32-byte key that encrypts data sent to `private-encrypted-` channels.
    ///   - connectionPool: the keep-alive connections to use (default ``PusherHTTPConnectionPool/shared``);
    ///     its lifetime is the caller's.
    ///   - logger: where the client logs.
    public init(
        appID: String,
        key: String,
        secret: String,
        host: PusherClientOptions.Host = .cluster("mt1"),
        encrypted: Bool = true,
        caFile: String? = nil,
        maxEventBytes: Int = PusherLimits.eventDataBytes,
        timeout: Duration = .seconds(10),
        encryptionMasterKey: [UInt8]? = nil,
        connectionPool: PusherHTTPConnectionPool = .shared,
        logger: Logger = Logger(label: "pusher.http")
    ) {
        self.appID = appID
        self.signature = RequestSignature(key: key, secret: secret)
        let scheme = encrypted ? "https" : "http"
        let defaultPort = encrypted ? 443 : 80
        switch host {
        case .cluster(let cluster):
            self.baseURL = "\(scheme)://api-\(cluster).pusher.com"
            self.endpoint = PusherHTTPEndpoint(host: "api-\(cluster).pusher.com", port: defaultPort, secure: encrypted, caFile: caFile)
        case .host(let name, let port):
            self.baseURL = "\(scheme)://\(name):\(port ?? defaultPort)"
            self.endpoint = PusherHTTPEndpoint(host: name, port: port ?? defaultPort, secure: encrypted, caFile: caFile)
        }
        self.maxEventBytes = maxEventBytes
        self.timeout = timeout
        self.encryptionMasterKey = encryptionMasterKey
        self.connectionPool = connectionPool
        self.logger = logger
    }

    // MARK: API

    /// `POST /apps/ID/events`: publish `event` to 1–100 channels; `socketID` excludes that
    /// connection (the bridge's echo guard); `info` asks for e.g. `user_count`. A user's
    /// `#server-to-user-` channel is not a channel name here: use ``sendToUser(_:event:data:)``.
    /// - Returns: the response body (JSON; `{}` unless `info` was asked for).
    @discardableResult
    public func trigger(
        channels: [String],
        event: String,
        data: String,
        socketID: String? = nil,
        info: [String] = []
    ) async throws(PusherHTTPError) -> String {
        guard (1...PusherLimits.channelsPerTrigger).contains(channels.count) else {
            throw .invalidRequest("a trigger names 1 to \(PusherLimits.channelsPerTrigger) channels, not \(channels.count)")
        }
        try validate(PusherBatchEvent(channel: channels[0], name: event, data: data, socketID: socketID))
        for channel in channels.dropFirst() {
            if let problem = ChannelName.problem(with: channel) { throw .invalidRequest(problem) }
        }
        var data = data
        if ChannelName(channels[0]).kind == .privateEncrypted {
            // Pusher allows one channel per encrypted trigger: each has its own key.
            guard channels.count == 1 else { throw .invalidRequest("an encrypted channel must be triggered alone") }
            data = try sealed(data, channel: channels[0])
        } else if channels.contains(where: { ChannelName($0).kind == .privateEncrypted }) {
            throw .invalidRequest("an encrypted channel must be triggered alone")
        }
        let body = JSONText.object([
            ("name", JSONText.quoted(event)),
            ("data", JSONText.quoted(data)),
            ("channels", "[" + channels.map(JSONText.quoted).joined(separator: ",") + "]"),
            ("socket_id", socketID.map(JSONText.quoted)),
            ("info", info.isEmpty ? nil : JSONText.quoted(info.joined(separator: ","))),
        ])
        return try await send(method: .POST, path: "/apps/\(appID)/events", body: Array(body.utf8))
    }

    /// `POST /apps/ID/batch_events`: up to 10 events in one request.
    @discardableResult
    public func triggerBatch(_ events: [PusherBatchEvent]) async throws(PusherHTTPError) -> String {
        guard (1...PusherLimits.batchSize).contains(events.count) else {
            throw .invalidRequest("a batch holds 1 to \(PusherLimits.batchSize) events, not \(events.count)")
        }
        var prepared: [PusherBatchEvent] = []
        for var event in events {
            try validate(event)
            if ChannelName(event.channel).kind == .privateEncrypted {
                event.data = try sealed(event.data, channel: event.channel)
            }
            prepared.append(event)
        }
        // Written once into bytes (JSONString copies the unescaped runs whole): the body is then
        // hashed for the signature and sent without another copy into a String first.
        var body: [UInt8] = []
        body.reserveCapacity(prepared.reduce(16) { $0 + $1.data.utf8.count + $1.channel.utf8.count + $1.name.utf8.count + 64 })
        body.append(contentsOf: #"{"batch":["#.utf8)
        for (index, event) in prepared.enumerated() {
            if index > 0 { body.append(UInt8(ascii: ",")) }
            event.appendJSON(to: &body)
        }
        body.append(contentsOf: "]}".utf8)
        return try await send(method: .POST, path: "/apps/\(appID)/batch_events", body: body)
    }

    /// `GET /apps/ID/channels`: occupied channels, optionally by prefix, with `info=user_count`
    /// (presence prefixes only).
    public func channels(prefix: String? = nil, info: [String] = []) async throws(PusherHTTPError) -> [String: PusherChannelInfo] {
        var params: [(String, String)] = []
        if let prefix { params.append(("filter_by_prefix", prefix)) }
        if !info.isEmpty { params.append(("info", info.joined(separator: ","))) }
        let text = try await send(method: .GET, path: "/apps/\(appID)/channels", params: params)
        return try Self.channelsReply(text)
    }

    /// Decodes a `GET /apps/ID/channels` reply `{"channels":{NAME:{…},…}}` (separate from the
    /// request so that the parser can be fuzzed without a server: Fuzz/README.md).
    static func channelsReply(_ text: String) throws(PusherHTTPError) -> [String: PusherChannelInfo] {
        guard let top = try? JSONScanner.object(text), case .raw(let channelsText)? = top["channels"],
            let entries = try? JSONScanner.objectMembers(of: channelsText)
        else { throw .unexpectedResponse("channels reply has no 'channels' object: \(text.prefix(200))") }
        var result: [String: PusherChannelInfo] = [:]
        for (name, value) in entries {
            result[name] = PusherChannelInfo(json: value.text ?? "{}")
        }
        return result
    }

    /// `GET /apps/ID/channels/NAME`: one channel's state (`info`: `user_count`,
    /// `subscription_count`, `cache`).
    public func channel(_ name: String, info: [String] = []) async throws(PusherHTTPError) -> PusherChannelInfo {
        if let problem = ChannelName.problem(with: name) { throw .invalidRequest(problem) }
        var params: [(String, String)] = []
        if !info.isEmpty { params.append(("info", info.joined(separator: ","))) }
        let text = try await send(method: .GET, path: "/apps/\(appID)/channels/\(name)", params: params)
        return PusherChannelInfo(json: text)
    }

    /// `GET /apps/ID/channels/NAME/users`: the user ids on a presence channel.
    public func users(channel name: String) async throws(PusherHTTPError) -> [String] {
        if let problem = ChannelName.problem(with: name) { throw .invalidRequest(problem) }
        guard ChannelName(name).kind == .presence else { throw .invalidRequest("users can only be listed for presence channels") }
        let text = try await send(method: .GET, path: "/apps/\(appID)/channels/\(name)/users")
        return try Self.usersReply(text)
    }

    /// Decodes a `GET /apps/ID/channels/NAME/users` reply `{"users":[{"id":…},…]}` (separate
    /// from the request so that the parser can be fuzzed without a server: Fuzz/README.md).
    static func usersReply(_ text: String) throws(PusherHTTPError) -> [String] {
        guard let top = try? JSONScanner.object(text), case .raw(let usersText)? = top["users"],
            let users = try? JSONScanner.arrayElements(of: usersText)
        else { throw .unexpectedResponse("users reply has no 'users' array: \(text.prefix(200))") }
        return users.compactMap { user in
            guard let text = user.text, let fields = try? JSONScanner.object(text) else { return nil }
            return fields["id"]?.stringOrNumber
        }
    }

    // MARK: validation and sending

    private func sealed(_ data: String, channel: String) throws(PusherHTTPError) -> String {
        guard let masterKey = encryptionMasterKey else {
            throw .invalidRequest("triggering on \(channel) needs the encryption master key")
        }
        let key = PusherAuth.sharedSecret(channel: channel, masterKey: masterKey)
        guard let wire = SecretBox.sealEventData(data, key: key) else {
            throw .invalidRequest("could not encrypt the event for \(channel)")
        }
        return wire
    }

    func validate(_ event: PusherBatchEvent) throws(PusherHTTPError) {
        if let problem = ChannelName.problem(with: event.channel) { throw .invalidRequest(problem) }
        if let problem = EventName.problem(with: event.name) { throw .invalidRequest(problem) }
        if event.data.utf8.count > maxEventBytes {
            throw .invalidRequest("event data is \(event.data.utf8.count) bytes; the limit is \(maxEventBytes)")
        }
        if let socketID = event.socketID, !SocketID.isValid(socketID) {
            throw .invalidRequest("socket_id '\(socketID)' is not of the form 123.456")
        }
    }

    func send(
        method: HTTPMethod,
        path: String,
        params: [(String, String)] = [],
        body: [UInt8]? = nil
    ) async throws(PusherHTTPError) -> String {
        let signed = signature.signedParameters(
            method: method.rawValue,
            path: path,
            params: params,
            body: body,
            timestamp: Int(Date().timeIntervalSince1970)
        )
        let query = signed.map { PusherAuthRequest.formEncode($0.0) + "=" + PusherAuthRequest.formEncode($0.1) }
            .joined(separator: "&")
        let request = PusherHTTPRequest(method: method, target: path + "?" + query, body: body.map { String(decoding: $0, as: UTF8.self) })
        let status: Int
        let text: String
        do {
            let response = try await connectionPool.execute(request, to: endpoint, timeout: timeout)
            status = response.status
            text = response.text
        } catch {
            logger.debug("Pusher HTTP request failed", metadata: ["pusher.path": "\(path)", "pusher.error": "\(error)"])
            throw error
        }
        guard (200..<300).contains(status) else {
            logger.debug("Pusher HTTP error status", metadata: ["pusher.path": "\(path)", "http.status": "\(status)"])
            throw .status(status, body: text)
        }
        return text
    }
}
