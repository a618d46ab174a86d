import BridgeCore
import Logging
import PusherChannels

/// The bridge's signed-in user (docs/contract.md §8.2): every connection signs in, and what each
/// is told goes to the supervisor's ``UsersMirror``.
extension BridgeRuntime {
    /// A Pusher client that signs in on every connection when `options` say how.
    static func makePusherClient(options: PusherClientOptions, logger: Logger) -> PusherClient {
        let client = PusherClient(options: options, logger: logger)
        if case .none = options.userAuthentication {} else { client.signIn() }
        return client
    }

    /// A sign-in result, an event to the bridge's user or a watchlist change, from `connection`.
    func pusherUserUpdate(_ update: PusherUserUpdate, connection: Int) {
        switch update {
        case .signedIn(let user):
            logger.info(
                "signed in to Pusher",
                metadata: ["user_id": "\(user.id)", "watchlist": "\(user.watchlist.count)"].merging(tag(connection)) { $1 })
            perform { $0.userSignedIn(connection: connection, userID: user.id, watchlist: user.watchlist, $1) }
        case .signInFailed(let error):
            metrics.errors(bridge: name, kind: "pusher_sign_in").increment()
            logger.error(
                "Pusher sign-in failed; trying again (1 s doubling to 30 s, and on every new connection)",
                metadata: ["error": "\(error)"].merging(tag(connection)) { $1 })
        case .event(let event):
            perform { $0.userEventReceived(connection: connection, event: event.name, data: event.data ?? "", $1) }
        case .watchlist(let change):
            perform { $0.watchlistChanged(connection: connection, online: change.kind == .online, userIDs: change.userIDs, $1) }
        }
        metrics.watchlistOnline(bridge: name).record(decisions.withLock { $0.supervisor.watchlistOnline })
    }

    /// `connection` left `connected`: it is no longer signed in (another connection's view of
    /// the watchlist is published, if one is signed in).
    func pusherUserSignedOut(connection: Int) {
        perform { $0.userSignedOut(connection: connection, $1) }
        metrics.watchlistOnline(bridge: name).record(decisions.withLock { $0.supervisor.watchlistOnline })
    }
}
