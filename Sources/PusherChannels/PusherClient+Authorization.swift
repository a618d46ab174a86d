import PusherProtocol

/// Obtaining channel auths: inline signer, async authorizer, or an HTTP auth endpoint.
extension PusherClient {
    // MARK: authorization

    func authorize(channel: String, socketID: String) async {
        let request = PusherAuthRequest(socketID: socketID, channelName: channel)
        do {
            let auth = try await obtainAuth(request)
            perform { $0.authorizationSucceeded(channel: channel, socketID: socketID, auth: auth, now: .now) }
        } catch {
            perform { $0.authorizationFailed(channel: channel, socketID: socketID, message: "\(error)") }
        }
    }

    private func obtainAuth(_ request: PusherAuthRequest) async throws -> PusherChannelAuth {
        switch options.authorization {
        case .none:
            throw PusherError.authorizationFailed(channel: request.channelName, message: "no authorization method configured")
        case .inline(let signer):
            return try signer.authorize(request)
        case .authorizer(let authorizer):
            return try await authorizer(request)
        case .endpoint(let url, let headers):
            var http = PusherAuthEndpointRequest(url: url, body: request.formBody)
            http.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
            for (name, value) in headers { http.headers.add(name: name, value: value) }
            return try await fetchAuth(http, channel: request.channelName)
        case .requestBuilder(let build):
            return try await fetchAuth(try await build(request), channel: request.channelName)
        }
    }

    private func fetchAuth(_ request: PusherAuthEndpointRequest, channel: String) async throws -> PusherChannelAuth {
        try PusherChannelAuth(json: try await fetchAuthReply(request) { .authorizationFailed(channel: channel, message: $0) })
    }

    /// POSTs `request` to an auth endpoint and returns its 200 reply (at most 64 KiB); other
    /// answers throw `failure(reason)`.
    func fetchAuthReply(_ request: PusherAuthEndpointRequest, failure: (String) -> PusherError) async throws -> String {
        guard let (endpoint, target) = PusherHTTPEndpoint.split(url: request.url) else {
            throw failure("auth endpoint '\(request.url)' is not an http(s) URL")
        }
        let response = try await connectionPool.execute(
            PusherHTTPRequest(method: request.method, target: target, body: request.body, headers: request.headers),
            to: endpoint, timeout: .seconds(10))
        guard response.body.readableBytes <= 64 * 1024 else {
            throw failure("auth endpoint reply over 64 KiB")
        }
        let text = response.text
        guard response.status == 200 else {
            throw failure("auth endpoint answered \(response.status): \(text.prefix(200))")
        }
        return text
    }
}
