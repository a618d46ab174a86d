# Sourced by the scripts that build what `make deb` ships (deb.sh, bench-memory.sh STATIC=1,
# order-file.sh), so that all three build one binary in one scratch folder (DEB_SCRATCH): a flag that
# differs between them would make SwiftPM recompile the whole folder.
#
# --static-swift-stdlib: the Swift runtime and FoundationEssentials linked in; the target host needs
# no Swift.
#
# -disable-autolink-library Foundation: TOMLKit imports Foundation, so every module that imports
# TOMLKit carries an autolink entry for -lFoundation (and through it CoreFoundation and ICU). The
# daemon uses none of it: the dynamic build does not even load libFoundation.so (--as-needed). In a
# static link, though, one generic specialization FoundationEssentials uses
# ($ss17_NativeDictionary…setValue…SS_ypTg5) is also defined in libFoundation.a's FileManager.o,
# which comes first on the link line; lld took it from there, and with it all of Foundation,
# CoreFoundation (whose constructor runs at start) and ICU's data: 3.7 MiB of the idle daemon's
# RSS and 46 MB of the binary (docs/history/benchmarks.md "Memory", step 7; Benchmarks/memory/resident_code.py
# names the modules). Without the entry FoundationEssentials' own copy is taken. deb.sh checks
# that neither binary defines Foundation's symbols again.
# shellcheck disable=SC2034  # used by the scripts that source this file
static_build_flags=(-c release --static-swift-stdlib
  -Xswiftc -Xfrontend -Xswiftc -disable-autolink-library -Xswiftc -Xfrontend -Xswiftc Foundation)
