/// A dead letter's name on the command line and the control socket: `BRIDGE:N`, the bridge and
/// the id its store gave the letter (docs/contract.md §8.3).
public struct DeadLetterID: Sendable, Hashable, CustomStringConvertible, Comparable {
    public var bridge: String
    public var number: UInt64

    public init(bridge: String, number: UInt64) {
        self.bridge = bridge
        self.number = number
    }

    /// `BRIDGE:N` with a valid bridge name and N ≥ 1 in decimal; nil otherwise.
    public init?(_ text: some StringProtocol) {
        guard let colon = text.lastIndex(of: ":") else { return nil }
        let bridge = String(text[..<colon])
        let digits = text[text.index(after: colon)...]
        guard LoadContext.isBridgeName(bridge), !digits.isEmpty, digits.utf8.count <= 20,
            digits.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
            let number = UInt64(digits), number > 0
        else { return nil }
        self.init(bridge: bridge, number: number)
    }

    public var description: String { "\(bridge):\(number)" }

    public static func < (lhs: DeadLetterID, rhs: DeadLetterID) -> Bool {
        (lhs.bridge, lhs.number) < (rhs.bridge, rhs.number)
    }
}

/// Which kept letters a request means.
public enum DeadLetterSelection: Sendable, Equatable {
    /// These letters.
    case ids([DeadLetterID])
    /// Every letter (of one bridge when `bridge` is set).
    case all(bridge: String?)
    /// Every letter with this code (of one bridge when `bridge` is set).
    case code(String, bridge: String?)
}

/// One request on the daemon's control socket (docs/contract.md §8.3): a single line of UTF-8
/// text, at most ``maxBytes`` long, ended by `\n`:
///
/// ```
/// ping
/// redrive all [bridge=B]  |  redrive code=C [bridge=B]  |  redrive B:N [B:N …]
/// purge all [bridge=B]    |  purge B:N [B:N …]
/// ```
///
/// Pure; ``parse(_:)`` never traps and names what is wrong. The daemon answers one line of JSON.
public enum ControlRequest: Sendable, Equatable {
    case ping
    case redrive(DeadLetterSelection)
    case purge(DeadLetterSelection)

    /// The longest request line accepted (about 3,000 ids).
    public static let maxBytes = 65_536

    /// Parses one request line (its `\n` removed or not).
    public static func parse(_ bytes: [UInt8]) -> Result<ControlRequest, ControlRequestError> {
        guard bytes.count <= maxBytes else { return .failure(.init("request longer than \(maxBytes) bytes")) }
        var bytes = bytes[...]
        if bytes.last == UInt8(ascii: "\n") { bytes = bytes.dropLast() }
        if bytes.last == UInt8(ascii: "\r") { bytes = bytes.dropLast() }
        guard let text = String(validating: bytes, as: UTF8.self) else { return .failure(.init("request is not UTF-8")) }
        if text.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) {
            return .failure(.init("request contains a control character; send one line"))
        }
        let words = text.split(separator: " ", omittingEmptySubsequences: true)
        guard let verb = words.first else { return .failure(.init("empty request; expected ping, redrive or purge")) }
        let rest = words.dropFirst()
        switch verb {
        case "ping":
            guard rest.isEmpty else { return .failure(.init("ping takes no arguments")) }
            return .success(.ping)
        case "redrive":
            return selection(rest, verb: "redrive", allowsCode: true).map { .redrive($0) }
        case "purge":
            return selection(rest, verb: "purge", allowsCode: false).map { .purge($0) }
        default:
            return .failure(.init("unknown request \"\(verb.prefix(40))\"; expected ping, redrive or purge"))
        }
    }

    private static func selection(
        _ words: ArraySlice<Substring>, verb: String, allowsCode: Bool
    ) -> Result<DeadLetterSelection, ControlRequestError> {
        guard let first = words.first else {
            return .failure(.init("\(verb) needs letter ids (BRIDGE:N), all\(allowsCode ? " or code=C" : "")"))
        }
        if first == "all" || first.hasPrefix("code=") {
            if first.hasPrefix("code=") {
                guard allowsCode else { return .failure(.init("\(verb) takes no code=")) }
            }
            var bridge: String?
            for word in words.dropFirst() {
                guard word.hasPrefix("bridge="), bridge == nil else {
                    return .failure(.init("unexpected \"\(word.prefix(40))\" after \(first.prefix(40)); only bridge=B may follow"))
                }
                let name = String(word.dropFirst("bridge=".count))
                guard LoadContext.isBridgeName(name) else { return .failure(.init("\"\(name.prefix(40))\" is not a bridge name")) }
                bridge = name
            }
            if first == "all" { return .success(.all(bridge: bridge)) }
            let code = String(first.dropFirst("code=".count))
            guard !code.isEmpty, code.utf8.count <= 64,
                code.utf8.allSatisfy({ ($0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "z")) || $0 == UInt8(ascii: "_") })
            else { return .failure(.init("code must be lower-case letters and '_' (e.g. invalid_channel)")) }
            return .success(.code(code, bridge: bridge))
        }
        var ids: [DeadLetterID] = []
        var seen: Set<DeadLetterID> = []
        for word in words {
            guard let id = DeadLetterID(word) else {
                return .failure(.init("\"\(word.prefix(40))\" is not a letter id; expected BRIDGE:N (see dead-letters list)"))
            }
            if seen.insert(id).inserted { ids.append(id) }
        }
        return .success(.ids(ids))
    }

    /// The request as one line (what the command line sends); ``parse(_:)`` reads it back.
    public var line: String {
        func selection(_ selection: DeadLetterSelection) -> String {
            switch selection {
            case .ids(let ids): ids.map(\.description).joined(separator: " ")
            case .all(let bridge): "all" + (bridge.map { " bridge=\($0)" } ?? "")
            case .code(let code, let bridge): "code=\(code)" + (bridge.map { " bridge=\($0)" } ?? "")
            }
        }
        switch self {
        case .ping: return "ping\n"
        case .redrive(let what): return "redrive \(selection(what))\n"
        case .purge(let what): return "purge \(selection(what))\n"
        }
    }
}

/// Why a control request was refused; the reply says it and nothing changes.
public struct ControlRequestError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
