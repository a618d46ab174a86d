import ArgumentParser

#if canImport(Glibc)
    import Glibc

    // Block SIGTERM and SIGINT in the main thread before any other thread exists, so every thread
    // inherits the mask. swift-service-lifecycle receives them through Dispatch's signal source
    // (a signalfd on Linux), which only sees blocked signals; a thread without the mask would let
    // the default action kill the process instead of shutting it down cleanly.
    var terminationSignals = sigset_t()
    sigemptyset(&terminationSignals)
    sigaddset(&terminationSignals, SIGTERM)
    sigaddset(&terminationSignals, SIGINT)
    pthread_sigmask(SIG_BLOCK, &terminationSignals, nil)
#endif

do {
    let command = try PusherLocalCommand.parse()
    try await command.run()
} catch {
    PusherLocalCommand.exit(withError: error)
}
