import BridgeVocabulary
import PusherProtocol

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// `[bridge.pusher]`: credentials, cluster or host, TLS, auth, limits (docs/contract.md §4).
extension LoadContext {
    func readPusher(_ reader: TableReader) -> PusherSettings? {
        reader.rejectUnknownKeys(allowed: Self.pusherKeys)
        let key = reader.nonEmptyString("key", required: true)
        var settings = PusherSettings(key: key ?? "")
        settings.appID = reader.nonEmptyString("app_id")
        settings.secret = reader.secret("secret")
        let cluster = reader.nonEmptyString("cluster")
        let host = reader.nonEmptyString("host")
        if let cluster, !cluster.utf8.allSatisfy({ ($0 >= 97 && $0 <= 122) || ($0 >= 48 && $0 <= 57) || $0 == 45 }) {
            report(reader.path.key("cluster"), "\"\(cluster)\" is not a cluster name like \"mt1\" or \"eu\"")
        }
        if cluster != nil, host != nil {
            report(reader.path.key("host"), "set either cluster (hosted Pusher) or host (a custom server), not both")
        }
        settings.useTLS = reader.bool("tls") ?? true
        let port = reader.port("port")
        if host == nil, port != nil {
            // A port without a host would silently talk to hosted Pusher on an odd port.
            report(reader.path.key("port"), "port needs host (hosted Pusher clusters use the standard ports)")
        }
        if let host {
            settings.cluster = nil
            settings.host = host
            settings.restHost = host
        } else {
            let name = cluster ?? "mt1"
            settings.cluster = name
            settings.host = "ws-\(name).pusher.com"
            settings.restHost = "api-\(name).pusher.com"
        }
        settings.port = port ?? (settings.useTLS ? 443 : 80)
        settings.restPort = settings.port
        if let restHost = reader.nonEmptyString("rest_host") { settings.restHost = restHost }
        if let restPort = reader.port("rest_port") { settings.restPort = restPort }
        settings.caFile = reader.existingFile("ca_file")
        if let endpoint = reader.nonEmptyString("auth_endpoint") {
            if endpoint.hasPrefix("http://") || endpoint.hasPrefix("https://") {
                settings.authEndpoint = endpoint
            } else {
                report(reader.path.key("auth_endpoint"), "expected an http:// or https:// URL, found \"\(endpoint)\"")
            }
        }
        settings.authHeaders = reader.stringTable("auth_headers") ?? [:]
        if !settings.authHeaders.isEmpty, !reader.has("auth_endpoint"), !reader.has("user_auth_endpoint") {
            report(reader.path.key("auth_headers"), "auth_headers only apply with auth_endpoint or user_auth_endpoint")
        }
        // The Pusher client's own limits (PusherClientLimits, checked again when the client is made).
        if let timeout = reader.duration("activity_timeout") {
            if let problem = PusherClientLimits.activityTimeoutProblem(timeout) {
                report(reader.path.key("activity_timeout"), problem)
            } else {
                settings.activityTimeout = timeout
            }
        }
        if let timeout = reader.duration("pong_timeout") {
            if let problem = PusherClientLimits.pongTimeoutProblem(timeout) {
                report(reader.path.key("pong_timeout"), problem)
            } else {
                settings.pongTimeout = timeout
            }
        }
        if let masterKey = reader.secret("encryption_master_key_base64") {
            let keyPath = reader.path.key(
                reader.has("encryption_master_key_base64") ? "encryption_master_key_base64" : "encryption_master_key_base64_file")
            // Kept as decoded here, without the spaces around it: the client decodes the kept text again.
            let trimmed = masterKey.value.trimmingSpaces()
            if let decoded = Self.base64Decoded(trimmed), decoded.count == 32 {
                settings.encryptionMasterKey = Secret(trimmed)
            } else {
                report(keyPath, "must be the base64 encoding of exactly 32 bytes")
            }
        }
        if let userID = reader.nonEmptyString("user_id") {
            if userID.utf8.count > PusherLimits.userIDLength {
                report(reader.path.key("user_id"), "is longer than \(PusherLimits.userIDLength) characters")
            } else {
                settings.userID = userID
            }
        }
        if let info = reader.jsonObject("user_info") {
            if info.utf8.count > PusherLimits.userInfoBytes {
                report(reader.path.key("user_info"), "is \(info.utf8.count) bytes as JSON; Pusher allows \(PusherLimits.userInfoBytes)")
            } else {
                settings.userInfoJSON = info
            }
        }
        if let limit = reader.size("max_event_bytes", in: 1...(10 * 1024 * 1024)) { settings.maxEventBytes = limit }
        if let lanes = reader.int("api_lanes", in: 1...64) { settings.apiLanes = lanes }
        if let connections = reader.int("connections", in: 1...3) { settings.connections = connections }
        readSignIn(reader, into: &settings)
        settings.drainRate = readDrainRate(reader)
        return key == nil ? nil : settings
    }

    static func base64Decoded(_ text: String) -> [UInt8]? {
        guard let data = Data(base64Encoded: text) else { return nil }
        return [UInt8](data)
    }
}
