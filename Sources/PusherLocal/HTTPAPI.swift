import Hummingbird
import Logging
import NIOCore
import PusherProtocol

import struct FoundationEssentials.Date

/// The HTTP side of pusher-local: Pusher's HTTP API under `/apps/ID/...` (docs/pusher-protocol.md §2)
/// and the development-only control endpoints under `/pusher-local/...`.
struct HTTPAPIResponder: HTTPResponder {
    typealias Context = BasicRequestContext

    let registry: AppRegistry
    let configuration: PusherLocalConfiguration
    let logger: Logger

    func respond(to request: Request, context: Context) async throws -> Response {
        var request = request
        let path = request.uri.path
        let query = parseQuery(request.uri.query ?? "")
        let segments = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst().map(String.init)
        let body: [UInt8]
        do {
            body = Array(buffer: try await request.collectBody(upTo: configuration.maxBodySize))
        } catch {
            return Self.text(413, "Request body is larger than \(configuration.maxBodySize) bytes")
        }
        do {
            if segments.first == "apps" {
                return try await api(request.method, path: path, segments: Array(segments.dropFirst()), query: query, body: body)
            }
            if segments.first == "pusher-local", configuration.controlEnabled {
                return try await ControlEndpoints(registry: registry, logger: logger)
                    .respond(request.method, segments: Array(segments.dropFirst()), query: query, body: body)
            }
            if path == "/" {
                return Self.text(200, "pusher-local: a Pusher-compatible development server\n")
            }
            if segments.first == "users" {
                // pusher-http-python 3.3 sends terminate_user_connections here, without /apps/ID.
                return Self.text(404, "Not found: \(path) (the HTTP API is under /apps/ID/, e.g. /apps/ID\(path))")
            }
            return Self.text(404, "Not found: \(path)")
        } catch let error as APIError {
            logger.debug(
                "HTTP request refused", metadata: ["http.path": "\(path)", "http.status": "\(error.status)", "reason": "\(error.message)"])
            return Self.text(error.status, error.message)
        }
    }

    static func text(_ status: Int, _ message: String) -> Response {
        Response(
            status: HTTPResponse.Status(code: status),
            headers: [.contentType: "text/plain; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(string: message.hasSuffix("\n") ? message : message + "\n"))
        )
    }

    static func json(_ text: String, status: Int = 200) -> Response {
        Response(
            status: HTTPResponse.Status(code: status), headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    /// `/apps/ID/events`, `/apps/ID/batch_events`, `/apps/ID/channels[/C[/users]]`,
    /// `/apps/ID/users/USER/terminate_connections`.
    func api(_ method: HTTPRequest.Method, path: String, segments: [String], query: [(String, String)], body: [UInt8]) async throws
        -> Response
    {
        guard let appID = segments.first, let live = registry.byID[appID] else {
            throw APIError(status: 404, message: "Unknown app id")
        }
        // docs/pusher-protocol.md §2 "Signing": key, timestamp window (±600 s), body_md5, HMAC.
        let now = Int(Date().timeIntervalSince1970)
        let signature = RequestSignature(key: live.app.key, secret: live.app.secret)
        if let failure = signature.verify(method: method.rawValue, path: path, params: query, body: body, now: now) {
            throw APIError(status: 401, message: failure.description)
        }
        let rest = Array(segments.dropFirst())
        if method == .post, rest.count == 1, rest[0] == "events" || rest[0] == "batch_events",
            live.state.withLock({ $0.faults.quotaExceeded })
        {
            throw APIError.overQuota
        }
        switch (method, rest.count, rest.first ?? "") {
        case (.post, 1, "events"):
            return try publishEvents(live, body: body)
        case (.post, 1, "batch_events"):
            return try publishBatch(live, body: body)
        case (.get, 1, "channels"):
            return try channels(live, query: query)
        case (.get, 2, "channels"):
            return try channel(live, name: rest[1], query: query)
        case (.get, 3, "channels") where rest[2] == "users":
            return try users(live, channel: rest[1])
        case (.post, 3, "users") where rest[2] == "terminate_connections":
            return try terminateUserConnections(live, userID: rest[1])
        default:
            throw APIError(status: 404, message: "Not found: \(method.rawValue) \(path)")
        }
    }

    static func parseBody(_ body: [UInt8]) throws(APIError) -> JSONValue {
        do {
            let value = try JSONValue.parse(body)
            guard case .object = value else { throw APIError.badRequest("Request body must be a JSON object") }
            return value
        } catch let error as JSONParseError {
            throw APIError.badRequest("Request body is not JSON: \(error)")
        } catch let error as APIError {
            throw error
        } catch {
            throw APIError.badRequest("Request body is not JSON")
        }
    }

    /// One event from a JSON object: `name`, `data` (a string; other JSON is encoded to text),
    /// `channels` or `channel`, `socket_id`, `info`.
    static func publishRequest(_ object: JSONValue, allowChannels: Bool) throws(APIError) -> PublishRequest {
        guard let name = object["name"]?.stringValue else { throw APIError.badRequest("Missing string field 'name'") }
        let data: String
        switch object["data"] {
        case .string(let s)?: data = s
        case let value?: data = value.encoded
        case nil: throw APIError.badRequest("Missing field 'data'")
        }
        var channels: [String] = []
        if allowChannels, let list = object["channels"] {
            guard case .array(let items) = list else { throw APIError.badRequest("'channels' must be an array of strings") }
            for item in items {
                guard let channel = item.stringValue else { throw APIError.badRequest("'channels' must be an array of strings") }
                channels.append(channel)
            }
        } else if let channel = object["channel"] {
            guard let channel = channel.stringValue else { throw APIError.badRequest("'channel' must be a string") }
            channels = [channel]
        } else {
            throw APIError.badRequest(allowChannels ? "Missing 'channels' or 'channel'" : "Missing 'channel'")
        }
        var socketID: String?
        switch object["socket_id"] {
        case .string(let s)?: socketID = s
        case .null?, nil: socketID = nil
        default: throw APIError.badRequest("'socket_id' must be a string")
        }
        let info = object["info"]?.stringValue.map { $0.split(separator: ",").map { String($0).trimmingSpaces } } ?? []
        return PublishRequest(name: name, data: data, channels: channels, socketID: socketID, info: info)
    }

    func publishEvents(_ live: LiveApp, body: [UInt8]) throws(APIError) -> Response {
        let request = try Self.publishRequest(Self.parseBody(body), allowChannels: true)
        if let error = AppHub.validate(request) { throw error }
        let now = ContinuousClock.now
        let info = live.perform { state in
            let actions = state.hub.publish(request, now: now)
            return (Self.channelsInfo(state.hub, channels: request.channels, info: request.info), actions)
        }
        return Self.json(info.map { "{\"channels\":{" + $0 + "}}" } ?? "{}")
    }

    func publishBatch(_ live: LiveApp, body: [UInt8]) throws(APIError) -> Response {
        let object = try Self.parseBody(body)
        guard case .array(let items)? = object["batch"] else { throw APIError.badRequest("Missing array 'batch'") }
        if items.count > PusherLimits.batchSize {
            throw APIError.badRequest("Batch has \(items.count) events; at most \(PusherLimits.batchSize)")
        }
        var requests: [PublishRequest] = []
        for item in items {
            let request = try Self.publishRequest(item, allowChannels: false)
            if let error = AppHub.validate(request) { throw error }
            requests.append(request)
        }
        let now = ContinuousClock.now
        let infos = live.perform { state in
            var actions: [HubAction] = []
            var infos: [String] = []
            var anyInfo = false
            for request in requests {
                actions += state.hub.publish(request, now: now)
                if let channel = request.channels.first, let attributes = Self.attributes(state.hub, channel: channel, info: request.info) {
                    anyInfo = true
                    infos.append("{" + attributes + "}")
                } else {
                    infos.append("{}")
                }
            }
            return (anyInfo ? infos : nil, actions)
        }
        return Self.json(infos.map { "{\"batch\":[" + $0.joined(separator: ",") + "]}" } ?? "{}")
    }

    /// `"user_count":N,"subscription_count":M` for the requested attributes, or nil when none apply.
    static func attributes(_ hub: AppHub, channel: String, info: [String]) -> String? {
        var parts: [String] = []
        if info.contains("user_count"), ChannelName(channel).kind == .presence {
            parts.append("\"user_count\":" + String(hub.userCount(channel)))
        }
        if info.contains("subscription_count") {
            parts.append("\"subscription_count\":" + String(hub.subscriptionCount(channel)))
        }
        return parts.isEmpty ? nil : parts.joined(separator: ",")
    }

    static func channelsInfo(_ hub: AppHub, channels: [String], info: [String]) -> String? {
        guard !info.isEmpty else { return nil }
        return channels.map { jsonQuoted($0) + ":{" + (attributes(hub, channel: $0, info: info) ?? "") + "}" }.joined(separator: ",")
    }

    /// `GET /apps/ID/channels?filter_by_prefix=P&info=user_count,subscription_count` — occupied
    /// channels, each with the attributes asked for (`user_count` only for `presence-` prefixes).
    func channels(_ live: LiveApp, query: [(String, String)]) throws(APIError) -> Response {
        let prefix = query.first { $0.0 == "filter_by_prefix" }?.1
        let info = (query.first { $0.0 == "info" }?.1).map { $0.split(separator: ",").map(String.init) } ?? []
        if info.contains("user_count"), prefix?.hasUTF8Prefix("presence-") != true {
            throw APIError.badRequest("info=user_count needs filter_by_prefix=presence-")
        }
        let body = live.state.withLock { state in
            state.hub.occupiedChannels(prefix: prefix).map { name in
                jsonQuoted(name) + ":{" + (Self.attributes(state.hub, channel: name, info: info) ?? "") + "}"
            }.joined(separator: ",")
        }
        return Self.json("{\"channels\":{" + body + "}}")
    }

    /// `GET /apps/ID/channels/C?info=user_count,subscription_count,cache`.
    func channel(_ live: LiveApp, name: String, query: [(String, String)]) throws(APIError) -> Response {
        if let problem = ChannelName.problem(with: name) { throw APIError.badRequest("Invalid channel name: \(problem)") }
        let info = (query.first { $0.0 == "info" }?.1).map { $0.split(separator: ",").map(String.init) } ?? []
        if info.contains("user_count"), ChannelName(name).kind != .presence {
            throw APIError.badRequest("info=user_count is only available for presence channels")
        }
        let now = ContinuousClock.now
        let body = live.state.withLock { state in
            let count = state.hub.subscriptionCount(name)
            var out = "{\"occupied\":" + (count > 0 ? "true" : "false")
            if info.contains("user_count") { out += ",\"user_count\":" + String(state.hub.userCount(name)) }
            if info.contains("subscription_count") { out += ",\"subscription_count\":" + String(count) }
            if info.contains("cache"), ChannelName(name).isCache {
                out += ",\"cache\":" + (state.hub.hasCachedEvent(name, now: now) ? "true" : "false")
            }
            return out + "}"
        }
        return Self.json(body)
    }

    /// `POST /apps/ID/users/USER/terminate_connections` (body `{}`): closes every signed-in
    /// connection of the user with 4009 (docs/pusher-protocol.md §2, "Endpoints"); answers `{}`.
    func terminateUserConnections(_ live: LiveApp, userID: String) throws(APIError) -> Response {
        if let problem = UserID.problem(with: userID) { throw APIError.badRequest("Invalid user id: \(problem)") }
        let closed = live.terminateUserConnections(userID)
        logger.debug("User connections terminated", metadata: ["pusher.user_id": "\(userID)", "pusher.connections": "\(closed)"])
        return Self.json("{}")
    }

    /// `GET /apps/ID/channels/C/users` — presence channels only.
    func users(_ live: LiveApp, channel: String) throws(APIError) -> Response {
        guard ChannelName(channel).kind == .presence else {
            throw APIError.badRequest("Users can only be listed for presence channels")
        }
        let ids = live.state.withLock { $0.hub.users(channel) }
        return Self.json("{\"users\":[" + ids.map { "{\"id\":" + jsonQuoted($0) + "}" }.joined(separator: ",") + "]}")
    }
}

extension String {
    var trimmingSpaces: String {
        var s = Substring(self)
        while s.first == " " { s = s.dropFirst() }
        while s.last == " " { s = s.dropLast() }
        return String(s)
    }
}
