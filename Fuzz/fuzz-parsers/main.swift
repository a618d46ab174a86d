import CFuzzerDriver
import Foundation

// `fuzz-parsers TARGET [libFuzzer flags and corpus directories]`: the first argument picks the
// target (FuzzTarget.all); everything after it goes to libFuzzer unchanged. scripts/fuzz.sh runs
// each target in turn; see Fuzz/README.md.
let arguments = CommandLine.arguments
guard arguments.count >= 2, let target = FuzzTarget.named(arguments[1]) else {
    var usage = "usage: fuzz-parsers TARGET [libFuzzer options] [corpus directories]\ntargets:\n"
    for target in FuzzTarget.all { usage += "  \(target.name.padding(toLength: 20, withPad: " ", startingAt: 0)) \(target.summary)\n" }
    FileHandle.standardError.write(Data(usage.utf8))
    exit(arguments.count >= 2 && arguments[1] == "list" ? 0 : 2)
}

// libFuzzer gets argv without the target name; the C strings stay owned by CommandLine.
let count = Int(CommandLine.argc) - 1
let driverArgv = UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>.allocate(capacity: count + 1)
driverArgv[0] = CommandLine.unsafeArgv[0]
for index in 1..<count { driverArgv[index] = CommandLine.unsafeArgv[index + 1] }
driverArgv[count] = nil
var driverArgc = Int32(count)
var driverArgvPointer: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = driverArgv
exit(LLVMFuzzerRunDriver(&driverArgc, &driverArgvPointer, target.callback))
