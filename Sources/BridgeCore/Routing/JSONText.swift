import PusherProtocol

/// Just enough JSON for the per-message path, without a Foundation round trip (docs/contract.md §5.1):
/// a validating scanner (RFC 8259) that decides whether `data` can be embedded as a JSON value,
/// and a string writer. Both work on UTF-8 bytes and allocate nothing but their output.
///
/// The grammar, the UTF-8 policy and the nesting limit are `PusherProtocol.JSONTokenizer`'s, the
/// same the client's frame scanner and pusher-local's parser use.
public enum JSONText {
    /// Whether `bytes` is exactly one JSON value (surrounding whitespace allowed).
    public static func isValid(_ bytes: some Collection<UInt8>) -> Bool {
        JSONTokenizer.isValid(bytes)
    }

    /// Whether `text` is exactly one JSON value.
    public static func isValid(_ text: String) -> Bool {
        JSONTokenizer.isValid(text)
    }

    /// Appends `value` as a JSON string literal (quotes included) to `output`.
    public static func appendString(_ value: some StringProtocol, to output: inout [UInt8]) {
        JSONString.append(value, to: &output)
    }

    /// `value` as a JSON string literal.
    public static func quoted(_ value: some StringProtocol) -> String {
        JSONString.quoted(value)
    }
}
