import PusherLocal
import PusherProtocol

/// A `pusher:subscribe` frame with a correct auth string.
public func subscribeFrame(socketID: String, channel: String, userID: String? = nil, app: PusherLocalApp = .demo) -> String {
    let kind = ChannelName(channel).kind
    guard kind.requiresAuth else {
        return "{\"event\":\"pusher:subscribe\",\"data\":{\"channel\":\"\(channel)\"}}"
    }
    var channelData: String?
    if kind == .presence { channelData = "{\"user_id\":\"\(userID ?? "u")\",\"user_info\":{\"name\":\"\(userID ?? "u")\"}}" }
    let auth = PusherAuth.channelAuth(key: app.key, secret: app.secret, socketID: socketID, channel: channel, channelData: channelData)
    var data = "{\"channel\":\"\(channel)\",\"auth\":\"\(auth)\""
    if let channelData { data += ",\"channel_data\":" + jsonQuoted(channelData) }
    return "{\"event\":\"pusher:subscribe\",\"data\":" + data + "}}"
}
