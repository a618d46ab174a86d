/// The network thread's flow control and the buffer policy it was built for (`MessageBuffer`'s
/// policy version): none unless the policy is `.pauseReading`.
struct IncomingFlow {
    var control: IncomingFlowControl?
    var version = -1

    var isPaused: Bool { control?.isPaused ?? false }
    var mayReconnect: Bool { control?.mayReconnect ?? true }
}
