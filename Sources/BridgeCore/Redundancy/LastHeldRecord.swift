import PusherProtocol

/// The file in the state directory that keeps, per channel, when the bridge last held it
/// (`<state_dir>/<bridge>/pusher_last_held`, docs/pusher-merge.md "Gap records"), so that the
/// first subscription after a restart reports the gap since then. Text, one channel a line:
///
///     # pusher-mqtt-bridge: when each channel was last held (ms since 1970, UTC)
///     1790000012345 device-7
///
/// Pure: rendering and parsing only; the daemon reads and writes the file. A damaged line is
/// skipped and counted (the channel then reports no restart gap), never fatal: the file is a
/// hint for gap records, not a promise.
public enum LastHeldRecord {
    public static let fileName = "pusher_last_held"

    /// The file's text for `times`, channels in name order.
    public static func render(_ times: [String: UTCTimestamp]) -> String {
        var text = "# pusher-mqtt-bridge: when each channel was last held (ms since 1970, UTC)\n"
        for channel in times.keys.sorted() {
            text += "\(times[channel]!.millisecondsSince1970) \(channel)\n"
        }
        return text
    }

    /// What a file holds: the times, and how many lines were not understood (not a comment, not
    /// `<milliseconds> <channel>` with a valid channel name and a time after 2000-01-01).
    public static func parse(_ text: String) -> (times: [String: UTCTimestamp], badLines: Int) {
        var times: [String: UTCTimestamp] = [:]
        var bad = 0
        for line in text.split(separator: "\n", omittingEmptySubsequences: true) {
            if line.hasPrefix("#") { continue }
            let parts = line.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2, let millis = Int64(parts[0]), millis >= 946_684_800_000,
                ChannelName.problem(with: String(parts[1])) == nil
            else {
                bad += 1
                continue
            }
            let channel = String(parts[1])
            // The later time wins if a channel is listed twice.
            if let known = times[channel], known.millisecondsSince1970 >= millis { continue }
            times[channel] = UTCTimestamp(millisecondsSince1970: millis)
        }
        return (times, bad)
    }
}
