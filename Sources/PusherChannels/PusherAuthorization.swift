import PusherProtocol

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// How the client authorizes private, presence and encrypted subscriptions — every mode
/// PusherSwift offers. Public channels never need it.
public enum PusherAuthorization: Sendable {
    /// No authorizer: only public channels (and channels given an auth at subscribe time).
    case none
    /// An auth endpoint: form POST `socket_id`, `channel_name` with `headers`, JSON reply
    /// `{"auth","channel_data"?,"shared_secret"?}` (PusherSwift `.endpoint`).
    case endpoint(url: String, headers: [String: String] = [:])
    /// Build the HTTP request yourself (PusherSwift `.authRequestBuilder`); the reply is decoded
    /// like an endpoint's.
    case requestBuilder(@Sendable (PusherAuthRequest) async throws -> PusherAuthEndpointRequest)
    /// Any async code returning the auth (PusherSwift `.authorizer`).
    case authorizer(@Sendable (PusherAuthRequest) async throws -> PusherChannelAuth)
    /// Sign in process with the app secret (PusherSwift `.inline`).
    case inline(PusherInlineSigner)
}
