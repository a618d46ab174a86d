import Backoff
import PusherProtocol
import TOMLKit

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A place in the config: the path shown to operators (`bridge.factory.rule.temperatures`) and the
/// path the source map knows (`bridge[1].rule[2]`).
struct ConfigKeyPath {
    var display: String
    var lookup: String

    func key(_ key: String) -> ConfigKeyPath {
        ConfigKeyPath(display: display.isEmpty ? key : display + "." + key, lookup: lookup.isEmpty ? key : lookup + "." + key)
    }

    /// Element `index` (1-based) of the array of tables at this path, shown by `name` when it has a usable one.
    func element(_ index: Int, name: String?) -> ConfigKeyPath {
        ConfigKeyPath(display: name.map { display + "." + $0 } ?? "\(display)[\(index)]", lookup: "\(lookup)[\(index)]")
    }

    static let root = ConfigKeyPath(display: "", lookup: "")
}
