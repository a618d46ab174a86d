import PusherProtocol

/// Signing in as a user: `sign_in`, `user_auth_endpoint`, `watchlist` in `[bridge.pusher]`, and
/// `[bridge.users]` (docs/contract.md §8.2).
extension LoadContext {
    static let usersKeys = ConfigKey.names(in: .users)

    /// The sign-in keys of `[bridge.pusher]`, read into `settings`.
    func readSignIn(_ reader: TableReader, into settings: inout PusherSettings) {
        settings.signIn = reader.bool("sign_in") ?? false
        if let endpoint = reader.nonEmptyString("user_auth_endpoint") {
            if !(endpoint.hasPrefix("http://") || endpoint.hasPrefix("https://")) {
                report(reader.path.key("user_auth_endpoint"), "expected an http:// or https:// URL, found \"\(endpoint)\"")
            } else if !settings.signIn {
                report(reader.path.key("user_auth_endpoint"), "only applies with sign_in = true")
            } else {
                settings.userAuthEndpoint = endpoint
            }
        }
        if let ids = reader.stringArray("watchlist") {
            let path = reader.path.key("watchlist")
            if !settings.signIn {
                report(path, "needs sign_in = true: the watchlist travels in the bridge's sign-in")
            } else if reader.has("user_auth_endpoint") {
                report(path, "the user_auth_endpoint's user_data chooses the watchlist; remove watchlist or user_auth_endpoint")
            } else if ids.count > PusherLimits.watchlistIDs {
                report(path, "holds \(ids.count) ids; Pusher allows at most \(PusherLimits.watchlistIDs) (it would keep the first 100)")
            } else {
                var seen = Set<String>()
                var valid = true
                for id in ids {
                    if let problem = UserID.problem(with: id) {
                        report(path, "\"\(id)\": \(problem)")
                        valid = false
                    } else if !seen.insert(id).inserted {
                        report(path, "\"\(id)\" is listed twice")
                        valid = false
                    }
                }
                if valid { settings.watchlist = ids }
            }
        }
    }

    /// `[bridge.users]`: `topic` is required.
    func readUsers(_ reader: TableReader) -> UsersSettings? {
        reader.rejectUnknownKeys(allowed: Self.usersKeys)
        let qos = reader.qos("qos") ?? 1
        guard let topic = reader.nonEmptyString("topic", required: true) else { return nil }
        if let problem = Self.mqttTopicProblem(topic) {
            report(reader.path.key("topic"), problem)
        } else if topic.contains("{") {
            report(reader.path.key("topic"), "takes no placeholders; users go to \(topic)/<id>/online and \(topic)/<id>/events/<event>")
        } else if topic.hasSuffix("/") {
            report(reader.path.key("topic"), "must not end with '/'")
        } else {
            return UsersSettings(topic: topic, qos: qos)
        }
        return nil
    }

    /// Cross-checks of the sign-in: the credentials it needs, the user id it signs in as, and
    /// what needs it (`[bridge.users]`).
    func checkSignIn(_ bridge: BridgeSettings, path: ConfigKeyPath) {
        let pusher = bridge.pusher
        let pusherPath = path.key("pusher")
        if pusher.signIn {
            if pusher.secret == nil, pusher.userAuthEndpoint == nil {
                report(pusherPath.key("sign_in"), "needs pusher.secret (or secret_file) or pusher.user_auth_endpoint to sign the user_data")
            }
            if pusher.userAuthEndpoint == nil, let id = pusher.userID, let problem = UserID.problem(with: id) {
                report(pusherPath.key("user_id"), "is the id the bridge signs in as: \(problem)")
            }
        }
        if bridge.users != nil, !pusher.signIn {
            report(
                path.key("users").key("topic"),
                "needs [bridge.pusher] sign_in = true: watchlist events and events to the user reach signed-in connections only")
        }
    }
}
