import Backoff
import PusherProtocol
import TOMLKit

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Holds the problems found so far and reads tables with type checks.
final class LoadContext {
    let file: String
    let sourceMap: ConfigSourceMap
    let environment: ConfigEnvironment
    var diagnostics: [ConfigDiagnostic] = []

    init(file: String, sourceMap: ConfigSourceMap, environment: ConfigEnvironment) {
        self.file = file
        self.sourceMap = sourceMap
        self.environment = environment
    }

    var configDirectory: String {
        let url = URL(fileURLWithPath: file)
        return url.deletingLastPathComponent().path
    }

    func report(_ path: ConfigKeyPath, _ message: String) {
        diagnostics.append(
            ConfigDiagnostic(file: file, line: sourceMap.line(for: path.lookup), keyPath: path.display, message: message))
    }

    /// A problem at the `column`th character (1-based) inside the string value at `path`: reported
    /// with the line and column in the file where the source map knows them.
    func report(_ path: ConfigKeyPath, column: Int, _ message: String) {
        let position = sourceMap.position(ofCharacter: column, inValueAt: path.lookup)
        diagnostics.append(
            ConfigDiagnostic(
                file: file, line: position?.line ?? sourceMap.line(for: path.lookup), column: position?.column, keyPath: path.display,
                message: message))
    }

    /// A path as given, or resolved against `base` when relative.
    func resolve(_ path: String, against base: String) -> String {
        if path.hasPrefix("/") { return path }
        return base.isEmpty ? path : base + "/" + path
    }
}
