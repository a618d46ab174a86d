import BridgeDaemon
import Dispatch

// The entry point runs the command on a task and parks the main thread on a semaphore, instead of
// the `dispatch_main()` an `async` @main uses on Linux. Nothing in the daemon runs on the main
// queue, so nothing changes for it; but valgrind (3.19 to 3.24) crashes on every program whose main
// thread parks in `dispatch_main()`, and this way the daemon runs under callgrind for the
// instruction counts of the benchmarks (BENCHMARKS.md). `main()` exits the process itself on errors.
// Before any thread allocates: the allocator's arenas (BridgeDaemon's FreeMemory says why).
FreeMemory.limitArenas()
let finished = DispatchSemaphore(value: 0)
Task.detached {
    await PusherMQTTBridge.main()
    finished.signal()
}
finished.wait()
