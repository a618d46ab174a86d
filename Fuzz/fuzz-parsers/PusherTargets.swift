import BridgeCore
import Foundation
import PusherProtocol

@testable import PusherChannels
@testable import PusherLocal

/// Fuzz targets for the Pusher side: the client's frame and reply parsers, pusher-local's frame
/// and request-body parsers (docs/pusher-protocol.md §1, §2).
enum PusherTargets {
    static let key = "fuzzkey"
    static let secret = "fuzzsecret"
    static let masterKey: [UInt8] = Array(repeating: 7, count: 32)

    // MARK: pusher-frame

    /// Each line is one server frame, fed to a `PusherConnectionStateMachine` that subscribed to
    /// a public, a presence and an encrypted channel (auths answered at once).
    /// Checks: `parse(frame.serverText) == frame`; every valid JSON object is accepted by the
    /// scanner; every frame the machine sends is valid JSON; presence member ids stay unique.
    static func clientFrames(_ input: Input) -> Int32 {
        let t0 = ContinuousClock.now
        var machine = PusherConnectionStateMachine(configuration: .init(), jitterSeed: 1)
        var pending = machine.connectRequested(now: t0)
        pending += machine.subscribeRequested("my-channel", now: t0)
        pending += machine.subscribeRequested("presence-room", now: t0)
        pending += machine.subscribeRequested("private-encrypted-box", now: t0)
        pending += machine.subscribeRequested("cache-prices", now: t0)
        // Signed in on every connection: signin_success, #server-to-user- events and watchlist
        // events reach the user sub-machine (docs/pusher-protocol.md §1 "User sign-in").
        pending += machine.signInRequested(now: t0)
        var now = t0
        for (number, line) in input.lines.prefix(64).enumerated() {
            now = t0 + .milliseconds(number * 700)
            checkScannerAcceptsValidObjects(line)
            do {
                let frame = try PusherFrame.parse(line)
                let again: PusherFrame
                do {
                    again = try PusherFrame.parse(frame.serverText)
                } catch {
                    violated("serverText of \(frame) does not parse: \(error)")
                }
                if again != frame { violated("round trip changed \(frame) into \(again)") }
                pending += machine.receivedFrame(frame, now: now)
            } catch {
                pending += machine.receivedMalformedFrame(error, now: now)
            }
            pending += machine.tick(now: now)
            // Carry out what the I/O owner would: authorize at once, check what is sent.
            while !pending.isEmpty {
                let actions = pending
                pending = []
                for action in actions {
                    switch action {
                    case .send(let text):
                        if !BridgeCore.JSONText.isValid(text) { violated("the client sends invalid JSON: \(text)") }
                    case .authorize(let channel, let socketID):
                        pending += machine.authorizationSucceeded(
                            channel: channel, socketID: socketID, auth: auth(channel: channel, socketID: socketID), now: now)
                    case .authenticateUser(let socketID):
                        let userData = PusherUser.userData(id: "me", watchlist: ["d1", "d2"])
                        pending += machine.userAuthenticationSucceeded(
                            socketID: socketID,
                            auth: PusherUserAuth(
                                auth: PusherAuth.userAuth(key: key, secret: secret, socketID: socketID, userData: userData),
                                userData: userData),
                            now: now)
                    case .user(.signedIn(let user)):
                        if user.id.isEmpty || UserID.problem(with: user.id) != nil { violated("signed in as an invalid user \(user)") }
                    default:
                        break
                    }
                }
            }
            let ids = machine.members(of: "presence-room").map(\.userID)
            if Set(ids).count != ids.count { violated("duplicate presence members \(ids)") }
        }
        return 0
    }

    static func auth(channel: String, socketID: String) -> PusherChannelAuth {
        let channelData = channel.hasPrefix("presence-") ? #"{"user_id":"me","user_info":{"n":1}}"# : nil
        return PusherChannelAuth(
            auth: PusherAuth.channelAuth(key: key, secret: secret, socketID: socketID, channel: channel, channelData: channelData),
            channelData: channelData,
            sharedSecret: channel.hasPrefix("private-encrypted-") ? PusherAuth.sharedSecret(channel: channel, masterKey: masterKey) : nil)
    }

    /// The client's scanner is a view of the shared tokenizer: a valid JSON object must scan.
    static func checkScannerAcceptsValidObjects(_ text: String) {
        guard text.utf8.first(where: { $0 != 0x20 && $0 != 0x09 && $0 != 0x0A && $0 != 0x0D }) == UInt8(ascii: "{"),
            BridgeCore.JSONText.isValid(text)
        else { return }
        do {
            _ = try JSONScanner.objectMembers(of: text)
        } catch {
            violated("the client's scanner rejects valid JSON \(text.debugDescription): \(error)")
        }
    }

    // MARK: pusher-local-frame

    /// Each line is a frame from one of two connections (alternating) to pusher-local's `AppHub`.
    /// A line `@sub CHANNEL` or `@sub CHANNEL<TAB>CHANNEL_DATA` becomes a correctly signed
    /// subscribe, so the fuzzer reaches private and presence paths it cannot sign itself.
    /// Checks: every frame the hub sends is valid JSON and readable by the client's parser;
    /// close codes are Pusher's 4000–4999.
    static func serverFrames(_ input: Input) -> Int32 {
        let t0 = ContinuousClock.now
        var hub = AppHub(app: PusherLocalApp(id: "1", key: key, secret: secret), activityTimeoutSeconds: 120)
        let socketIDs = ["1.1", "2.2"]
        var actions = hub.connected(ConnectionID(1), socketID: socketIDs[0])
        actions += hub.connected(ConnectionID(2), socketID: socketIDs[1])
        for (number, line) in input.lines.prefix(64).enumerated() {
            let from = number % 2
            var text = line
            if line.hasPrefix("@sub ") {
                let rest = line.dropFirst(5)
                let parts = rest.split(separator: "\t", maxSplits: 1, omittingEmptySubsequences: false)
                let channel = String(parts[0])
                let channelData = parts.count > 1 ? String(parts[1]) : nil
                let auth = PusherAuth.channelAuth(
                    key: key, secret: secret, socketID: socketIDs[from], channel: channel, channelData: channelData)
                text = ClientFrame.subscribe(channel: channel, auth: auth, channelData: channelData)
            }
            actions += hub.received(text, from: ConnectionID(UInt64(from + 1)), now: t0 + .milliseconds(number * 300))
        }
        for action in actions {
            switch action {
            case .send(_, let frame), .deliver(let frame, _):
                checkServerFrame(frame)
            case .close(_, let code, _):
                if !(4000...4999).contains(code) { violated("close code \(code) outside 4000-4999") }
            case .webhook:
                break
            }
        }
        return 0
    }

    static func checkServerFrame(_ frame: String) {
        if !BridgeCore.JSONText.isValid(frame) { violated("pusher-local sends invalid JSON: \(frame.debugDescription)") }
        do {
            _ = try PusherFrame.parse(frame)
        } catch {
            violated("the client cannot read pusher-local's frame \(frame.debugDescription): \(error)")
        }
    }

    // MARK: http-reply

    /// The first byte picks the reply kind (auth endpoint, channel info, channels list, users list);
    /// the rest is the reply body. Checks: an accepted auth reply survives re-encoding unchanged;
    /// parsed counts equal the numbers in the reply.
    static func httpReplies(_ input: Input) -> Int32 {
        guard let kind = input.bytes.first else { return 0 }
        let body = String(decoding: input.bytes.dropFirst(), as: UTF8.self)
        switch kind % 4 {
        case 0:
            guard let auth = try? PusherChannelAuth(json: body) else { return 0 }
            var members: [(String, String?)] = [("auth", JSONString.quoted(auth.auth))]
            members.append(("channel_data", auth.channelData.map { JSONString.quoted($0) }))
            if let secret = auth.sharedSecret { members.append(("shared_secret", JSONString.quoted(Data(secret).base64EncodedString()))) }
            let text = PusherChannels.JSONText.object(members)
            guard let again = try? PusherChannelAuth(json: text) else { violated("re-encoded auth reply \(text) is refused") }
            if again != auth { violated("auth reply changed on re-encoding: \(auth) vs \(again)") }
        case 1:
            let info = PusherChannelInfo(json: body)
            checkCounts(info)
        case 2:
            guard let channels = try? PusherHTTPClient.channelsReply(body) else { return 0 }
            for info in channels.values { checkCounts(info) }
        default:
            guard let users = try? PusherHTTPClient.usersReply(body) else { return 0 }
            if users.contains(where: \.isEmpty) && !body.contains(#""""#) { violated("empty user id from \(body)") }
        }
        return 0
    }

    static func checkCounts(_ info: PusherChannelInfo) {
        guard let fields = try? JSONScanner.object(info.json) else { return }
        // The count is the JSON number's value: its text, or `-0` (a valid JSON number) for 0.
        if let count = info.userCount, let text = fields["user_count"]?.stringOrNumber,
            text != String(count) && !(count == 0 && text == "-0")
        {
            violated("user_count \(count) is not what \(info.json) says")
        }
    }

    // MARK: http-body

    /// The body of `POST /apps/1/events` (or, when it has a `batch`, of `batch_events`) through
    /// pusher-local's parser and hub, to a connection subscribed to every channel named.
    /// Checks: every delivered frame is read by the client's parser with exactly the event name,
    /// channel and data of the request (docs/pusher-protocol.md §2: data is delivered unchanged).
    static func requestBodies(_ input: Input) -> Int32 {
        guard let object = try? HTTPAPIResponder.parseBody(input.bytes) else { return 0 }
        var requests: [PublishRequest] = []
        if case .array(let items)? = object["batch"] {
            for item in items.prefix(PusherLimits.batchSize) {
                guard let request = try? HTTPAPIResponder.publishRequest(item, allowChannels: false) else { return 0 }
                requests.append(request)
            }
        } else {
            guard let request = try? HTTPAPIResponder.publishRequest(object, allowChannels: true) else { return 0 }
            requests.append(request)
        }
        let t0 = ContinuousClock.now
        var hub = AppHub(app: PusherLocalApp(id: "1", key: key, secret: secret), activityTimeoutSeconds: 120)
        _ = hub.connected(ConnectionID(1), socketID: "1.1")
        for request in requests where AppHub.validate(request) == nil {
            for channel in request.channels where ChannelName(channel).kind == .public {
                _ = hub.received(ClientFrame.subscribe(channel: channel, auth: nil, channelData: nil), from: ConnectionID(1), now: t0)
            }
            for action in hub.publish(request, now: t0) {
                guard case .deliver(let text, _) = action else { continue }
                checkServerFrame(text)
                guard let frame = try? PusherFrame.parse(text) else { continue }
                if frame.event != request.name || frame.data != request.data || !request.channels.contains(frame.channel ?? "") {
                    violated("request \(request) delivered as \(frame)")
                }
            }
        }
        return 0
    }
}
