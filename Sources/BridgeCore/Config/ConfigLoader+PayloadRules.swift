/// The payload keys of a rule (docs/contract.md §7.3): `payload`, `where`, `throttle`,
/// `on_change`, `max_targets`.
extension LoadContext {

    /// `payload = "data" | "envelope" | "json:/pointer"`; `.data` when absent, nil when invalid (reported).
    func readPayloadMode(_ reader: TableReader) -> PayloadMode? {
        guard let text = reader.string("payload") else { return reader.has("payload") ? nil : .data }
        switch text {
        case "data": return .data
        case "envelope": return .envelope
        default: break
        }
        if text.hasPrefix("json:") {
            switch JSONPointer.parse(String(text.dropFirst(5))) {
            case .success(let pointer): return .projection(pointer)
            case .failure(let error):
                // The pointer starts after `json:` (5 characters).
                report(reader.path.key("payload"), column: error.column + 5, "not a JSON Pointer (RFC 6901): \(error.message)")
                return nil
            }
        }
        var message = "\"\(text)\" is not one of \"data\", \"envelope\", \"json:/pointer\""
        if let suggestion = Spelling.suggestion(for: text, among: ["data", "envelope"]) { message += " (did you mean \"\(suggestion)\"?)" }
        report(reader.path.key("payload"), message)
        return nil
    }

    /// `where`, `throttle`, `on_change`, `max_targets`; nil when one of them is invalid (reported).
    func readConditions(_ reader: TableReader) -> PayloadConditions? {
        var valid = true
        var conditions = PayloadConditions()
        if let source = reader.string("where") {
            switch WhereExpression.parse(source) {
            case .success(let expression):
                conditions.condition = expression
            case .failure(let error):
                report(reader.path.key("where"), column: error.column, "\(error.message) (in where = \"\(source)\")")
                valid = false
            }
        } else if reader.has("where") {
            valid = false
        }
        if reader.has("throttle") {
            if let throttle = reader.duration("throttle", minimum: .milliseconds(10)) {
                conditions.throttle = throttle
            } else {
                valid = false
            }
        }
        if reader.has("on_change") {
            if let onChange = reader.bool("on_change") { conditions.onChange = onChange } else { valid = false }
        }
        if reader.has("max_targets") {
            if let maxTargets = reader.int("max_targets", in: 1...1_000_000) {
                conditions.maxTargets = maxTargets
                if !conditions.shapesRate {
                    report(reader.path.key("max_targets"), "only applies with throttle or on_change")
                    valid = false
                }
            } else {
                valid = false
            }
        }
        return valid ? conditions : nil
    }
}
