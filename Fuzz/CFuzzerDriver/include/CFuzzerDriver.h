// libFuzzer's entry point for programs that bring their own main (libclang_rt.fuzzer_no_main).
// SwiftPM links its own `main` into every executable, so `-sanitize=fuzzer` never fuzzes
// (docs/swift-stack.md "Fuzzing"): our main calls this driver instead.
#ifndef C_FUZZER_DRIVER_H
#define C_FUZZER_DRIVER_H
#include <stddef.h>
#include <stdint.h>

/// Runs libFuzzer with `argc`/`argv` (its usual flags, corpus directories, crash files) and
/// calls `callback` once per input. Returns the process exit status libFuzzer chose.
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));

#endif
