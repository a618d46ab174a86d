// swift-format-ignore-file
// (The README prints these examples with its own alignment; swift-format would re-wrap them.)
import Logging
import PusherChannels

// The examples of Sources/PusherChannels/README.md, compiled with the tests: `make lint`
// (scripts/check-docs.py) checks that every README block marked `compiled` appears here line for
// line (imports aside), so an API change that breaks an example breaks the build. They are not
// run (they would need a server and run for ever); what they show is tested in
// SignInIntegrationTests and PusherLocalIntegrationTests.
enum ReadmeExamples {
    static func handle(_ channel: String?, _ name: String, _ data: String?, _ userID: String?) {}
    static func replaceAll(_ channel: String, _ members: [PusherMember]) {}
    static func add(_ channel: String, _ member: PusherMember) {}
    static func remove(_ channel: String, _ member: PusherMember) {}
    static func log(_ state: PusherConnectionState, _ socketID: String?) {}
    static func handleUser(_ change: PusherUserUpdate) {}

    /// docs/pusherchannels.md and the DocC catalogue's landing page.
    static func quickStart(secret: String) async throws {
        let client = PusherClient(options: PusherClientOptions(
            key: "app-key", host: .cluster("eu"),
            authorization: .endpoint(url: "https://example.com/pusher/auth", headers: ["Authorization": "Bearer …"])))
        let updates = client.updates()               // one ordered stream: events, presence, states, errors
        client.subscribe("market-data")              // before or after connecting; resubscribed after every reconnect
        client.subscribeToPresenceChannel("presence-operators")

        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await client.run() } // structured: returns when cancelled
            client.connect()
            for await update in updates {
                if case .event(let event) = update { print(event.channel ?? "", event.name, event.data ?? "") }
            }
            group.cancelAll()
            try await group.waitForAll()             // run() has returned
        }

        let api = PusherHTTPClient(appID: "123", key: "app-key", secret: secret, host: .cluster("eu"))
        try await api.trigger(channels: ["market-data"], event: "new-price", data: #"{"price":42}"#)
    }

    static func usage(secret: String, masterKey: String) async throws {
        let signer = try PusherInlineSigner(key: "app-key", secret: secret, userID: "bridge-factory",
                                            encryptionMasterKeyBase64: masterKey)
        let client = PusherClient(
            options: PusherClientOptions(key: "app-key", host: .host("127.0.0.1", port: 6001), encrypted: false,
                                         authorization: .inline(signer)),
            logger: Logger(label: "pusher"))

        let updates = client.updates()                 // ONE ordered stream of everything
        client.subscribe("market-data")                // before or after connect
        client.subscribeToPresenceChannel("presence-operators")
        client.subscribe("private-encrypted-orders")   // delivered decrypted

        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await client.run() }   // structured; returns when cancelled
            client.connect()
            for await update in updates {
                switch update {
                case .event(let e): handle(e.channel, e.name, e.data, e.userID)   // data exactly as received
                case .presence(.subscriptionSucceeded(let channel, let members, _)): replaceAll(channel, members)
                case .presence(.memberAdded(let channel, let m)): add(channel, m)
                case .presence(.memberRemoved(let channel, let m)): remove(channel, m)
                case .connectionStateChanged(let change): log(change.current, change.socketID)
                case .user(let change): handleUser(change)   // after signIn(), below
                case .subscriptionSucceeded, .subscriptionFailed, .error: break
                }
            }
            group.cancelAll()
            try await group.waitForAll()                // run() has returned
        }

        // HTTP API, excluding our own connection (echo guard):
        let api = PusherHTTPClient(appID: "1", key: "app-key", secret: secret, host: .host("127.0.0.1", port: 6001), encrypted: false)
        try await api.triggerBatch([PusherBatchEvent(channel: "sensor-1", name: "temperature", data: "21.5", socketID: client.socketID)])
    }

    static func signingIn(secret: String, token: String, useBackend: Bool, socketIDFromTheForm: String) async throws {
        // A device signing with the secret (trusted processes only) …
        let deviceSigner = try PusherInlineSigner(key: "app-key", secret: secret)
        let deviceData = PusherUser.userData(id: "device-0001", userInfo: #"{"room":"lab"}"#)
        // … or an app asking its backend: form POST socket_id, answer {"auth","user_data"}.
        let fromBackend = PusherUserAuthentication.endpoint(url: "https://example.com/pusher/user-auth",
                                                            headers: ["Authorization": "Bearer " + token])
        let device = PusherClient(
            options: PusherClientOptions(key: "app-key", host: .host("127.0.0.1", port: 6001), encrypted: false,
                                         userAuthentication: useBackend ? fromBackend : .inline(deviceSigner, userData: deviceData)),
            logger: Logger(label: "device"))
        let userUpdates = device.userUpdates()
        device.signIn()                                 // before or after connect; again after every reconnect
        device.connect()
        for await change in userUpdates {
            switch change {
            case .signedIn(let user): print("signed in as", user.id, "watching", user.watchlist)
            case .signInFailed(let error): print(error)                  // retried: 1 s doubling to 30 s
            case .event(let event): print("to me:", event.name, event.data ?? "")
            case .watchlist(let w): print(w.userIDs, w.kind == .online ? "online" : "offline")
            }
        }

        // A backend: answer the endpoint, send to one user, revoke a device.
        let backend = PusherHTTPClient(appID: "1", key: "app-key", secret: secret, host: .host("127.0.0.1", port: 6001), encrypted: false)
        let reply = try backend.authenticateUser(socketID: socketIDFromTheForm, userID: "device-0001", watchlist: ["device-0002"])
        try await backend.sendToUser("device-0001", event: "reboot", data: #"{"in":5}"#)
        try await backend.terminateUserConnections("device-0001")     // its connections close with 4009
        _ = reply
    }
}
