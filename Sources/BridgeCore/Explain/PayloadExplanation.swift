/// What `route` adds for rules that read the payload or shape the rate (docs/contract.md §7.3):
/// the values their JSON Pointers find, the `where` verdict with the term that decided it, and
/// what `throttle` and `on_change` would do with the message.
enum PayloadExplanation {
    /// Lines about `conditions` and the pointers of `pointers` for one rule and one payload.
    static func lines(
        conditions: PayloadConditions, pointers: [JSONPointer], payload: [UInt8], target: String?
    ) -> [String] {
        var lines: [String] = []
        var document = PayloadDocument(payload)
        var shown = Set<JSONPointer>()
        if let condition = conditions.condition {
            let verdict = condition.explain(&document)
            lines.append(
                "    where \(condition.source) -> \(verdict.matches ? "true: forwarded" : "false: not forwarded (outcome filtered)")"
                    + " — decided by \(verdict.decidingTerm)")
            for reading in verdict.readings where shown.insert(reading.pointer).inserted {
                lines.append("      \(describe(reading.pointer, reading.value, isJSON: document.isJSON()))")
            }
        }
        let others = pointers.filter { shown.insert($0).inserted }
        if !others.isEmpty {
            lines.append("    json values:")
            for pointer in others {
                lines.append("      \(describe(pointer, document.value(at: pointer), isJSON: document.isJSON()))")
            }
        }
        let targetText = target.map { " for target \"\($0)\"" } ?? ""
        if let throttle = conditions.throttle {
            lines.append(
                "    throttle \(CheckReport.format(throttle))\(targetText): the first message opens an interval; the latest one in it is"
                    + " sent at its end, earlier ones are replaced (outcome coalesced)")
        }
        if conditions.onChange {
            lines.append(
                "    on_change\(targetText): sent only if it differs from the last payload sent to that target (else outcome unchanged)")
        }
        return lines
    }

    private static func describe(_ pointer: JSONPointer, _ value: JSONPointerValue?, isJSON: Bool) -> String {
        let name = pointer.source.isEmpty ? "\"\" (the whole payload)" : pointer.source
        guard let value else { return "\(name) = (missing\(isJSON ? "" : ": the payload is not JSON"))" }
        switch value {
        case .string(let text): return "\(name) = \"\(text)\" (string)"
        case .number(let text): return "\(name) = \(text) (number)"
        case .bool(let flag): return "\(name) = \(flag) (boolean)"
        case .null: return "\(name) = null"
        case .object(let text): return "\(name) = \(text.prefix(80)) (object)"
        case .array(let text): return "\(name) = \(text.prefix(80)) (array)"
        }
    }
}
