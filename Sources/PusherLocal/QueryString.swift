import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import HummingbirdWebSocket
import Locking
import Logging
import NIOCore
import NIOWebSocket
import PusherProtocol
import ServiceLifecycle
import Synchronization

/// `/path?query` split at the first `?`.
func splitPathAndQuery(_ target: String) -> (path: String, query: String) {
    guard let mark = target.firstIndex(of: "?") else { return (target, "") }
    return (String(target[..<mark]), String(target[target.index(after: mark)...]))
}

/// Decodes `a=1&b=x%2Cy` into pairs (percent-decoding, `+` as space), keeping order and repeats.
func parseQuery(_ query: String) -> [(String, String)] {
    guard !query.isEmpty else { return [] }
    return query.split(separator: "&").map { pair in
        let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
        let name = percentDecoded(parts[0])
        let value = parts.count > 1 ? percentDecoded(parts[1]) : ""
        return (name, value)
    }
}

/// Percent-decoding with `+` as space (form encoding, as Python's `urlencode` produces).
/// Invalid escapes are kept as they are.
func percentDecoded(_ text: Substring) -> String {
    var out: [UInt8] = []
    let bytes = Array(text.utf8)
    var i = 0
    func hex(_ b: UInt8) -> UInt8? {
        switch b {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): b - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): b - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): b - UInt8(ascii: "A") + 10
        default: nil
        }
    }
    while i < bytes.count {
        let b = bytes[i]
        if b == UInt8(ascii: "%"), i + 2 < bytes.count, let hi = hex(bytes[i + 1]), let lo = hex(bytes[i + 2]) {
            out.append(hi << 4 | lo)
            i += 3
        } else if b == UInt8(ascii: "+") {
            out.append(UInt8(ascii: " "))
            i += 1
        } else {
            out.append(b)
            i += 1
        }
    }
    return String(decoding: out, as: UTF8.self)
}
