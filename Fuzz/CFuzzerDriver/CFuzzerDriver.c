// Only the declaration in include/CFuzzerDriver.h matters; the definition comes from
// libclang_rt.fuzzer_no_main, linked by scripts/fuzz.sh. SwiftPM needs one source file.
#include "CFuzzerDriver.h"
