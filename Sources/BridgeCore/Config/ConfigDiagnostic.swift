/// One problem found in a `bridges.conf`, formatted the way docs/contract.md §3 prescribes:
///
///     FILE:LINE:COLUMN: error: message            (syntax errors)
///     FILE:LINE: error: KEYPATH: message          (semantic errors whose line is known)
///     FILE: error: KEYPATH: message               (semantic errors without a reliable line)
public struct ConfigDiagnostic: Sendable, Hashable, CustomStringConvertible {
    /// The config file as the operator named it.
    public var file: String
    /// 1-based line, when it can be known reliably.
    public var line: Int?
    /// 1-based column: syntax errors, and errors inside a value (a `where` expression, a JSON Pointer).
    public var column: Int?
    /// Where in the config the problem is, e.g. `bridge.factory.rule.temperatures.channel`.
    public var keyPath: String?
    /// What is wrong, in words an operator understands.
    public var message: String

    public init(file: String, line: Int? = nil, column: Int? = nil, keyPath: String? = nil, message: String) {
        self.file = file
        self.line = line
        self.column = column
        self.keyPath = keyPath
        self.message = message
    }

    public var description: String {
        var text = file
        if let line {
            text += ":\(line)"
            if let column { text += ":\(column)" }
        }
        text += ": error: "
        if let keyPath, !keyPath.isEmpty { text += keyPath + ": " }
        text += message
        return text
    }
}

/// A config that cannot be used: every problem found, in file order (docs/contract.md §3: "prints **every** error").
public struct ConfigError: Error, Sendable, CustomStringConvertible {
    /// All problems, sorted by line (problems without a line last, in the order found).
    public var diagnostics: [ConfigDiagnostic]

    public init(diagnostics: [ConfigDiagnostic]) {
        self.diagnostics = diagnostics
    }

    /// One problem per line, ready for stderr.
    public var description: String {
        diagnostics.map(\.description).joined(separator: "\n")
    }
}

/// "Did you mean" suggestions for misspelt keys and values.
enum Spelling {
    /// The closest candidate within a small edit distance (or one that is a prefix of the word), if any.
    static func suggestion(for word: String, among candidates: some Sequence<String>) -> String? {
        let lowered = word.lowercased()
        let limit = max(1, min(3, word.count / 3))
        var best: (String, Int)?
        for candidate in candidates {
            let distance = editDistance(lowered, candidate)
            if distance <= limit, distance < (best?.1 ?? Int.max) {
                best = (candidate, distance)
            }
        }
        if best == nil {
            best = candidates.first { !$0.isEmpty && $0.count >= 3 && lowered.hasPrefix($0) }.map { ($0, 0) }
        }
        return best?.0
    }

    /// Optimal-string-alignment distance over Unicode scalars: insertions, deletions,
    /// substitutions and transpositions of neighbours (`jsno` → `json` is 1).
    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a.unicodeScalars)
        let b = Array(b.unicodeScalars)
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var table = [[Int]](repeating: [Int](repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in 0...a.count { table[i][0] = i }
        for j in 0...b.count { table[0][j] = j }
        for i in 1...a.count {
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                table[i][j] = min(table[i - 1][j] + 1, table[i][j - 1] + 1, table[i - 1][j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    table[i][j] = min(table[i][j], table[i - 2][j - 2] + 1)
                }
            }
        }
        return table[a.count][b.count]
    }
}
