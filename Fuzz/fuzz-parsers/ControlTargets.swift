@testable import BridgeCore

/// The daemon's control socket (docs/contract.md §8.3).
enum ControlTargets {
    /// The whole input is one request as a client would send it → `ControlRequest.parse`. Checks:
    /// an accepted request renders (`line`) and parses back to itself, names only valid ids
    /// (valid bridge names, numbers ≥ 1) and codes; the input held no control character but its
    /// line end; a refusal says why in a bounded message (the input is never echoed whole).
    static func requests(_ input: Input) -> Int32 {
        switch ControlRequest.parse(input.bytes) {
        case .success(let request):
            let line = Array(request.line.utf8)
            guard case .success(let again) = ControlRequest.parse(line), again == request else {
                violated("\(request) renders as \(request.line.debugDescription), which does not parse back")
            }
            var body = input.bytes[...]
            if body.last == UInt8(ascii: "\n") { body = body.dropLast() }
            if body.last == UInt8(ascii: "\r") { body = body.dropLast() }
            if body.contains(where: { $0 < 0x20 || $0 == 0x7F }) { violated("accepted a control character: \(input.bytes)") }
            func check(_ selection: DeadLetterSelection) {
                switch selection {
                case .ids(let ids):
                    if ids.isEmpty { violated("accepted an empty id list") }
                    if Set(ids).count != ids.count { violated("ids repeated: \(ids)") }
                    for id in ids where id.number == 0 || !LoadContext.isBridgeName(id.bridge) || DeadLetterID(id.description) != id {
                        violated("accepted the id \(id)")
                    }
                case .all(let bridge):
                    if let bridge, !LoadContext.isBridgeName(bridge) { violated("accepted bridge=\(bridge)") }
                case .code(let code, let bridge):
                    if code.isEmpty || code.utf8.contains(where: { !(0x61...0x7A).contains($0) && $0 != 0x5F }) {
                        violated("accepted code=\(code)")
                    }
                    if let bridge, !LoadContext.isBridgeName(bridge) { violated("accepted bridge=\(bridge)") }
                }
            }
            switch request {
            case .ping: break
            case .redrive(let selection): check(selection)
            case .purge(let selection):
                if case .code = selection { violated("purge accepted a code") }
                check(selection)
            }
        case .failure(let error):
            if error.message.isEmpty || error.message.utf8.count > 300 {
                violated("refusal message of \(error.message.utf8.count) bytes: \(error.message.prefix(80))")
            }
        }
        return 0
    }
}
