// libFuzzer's entry for programs that keep their own main (compiler-rt's FuzzerInterface.h, which
// the Swift toolchain does not install). SwiftPM links an executable target's top-level code as
// its main, so a fuzz target cannot let libFuzzer's own main run: it calls this instead.
#ifndef LOCGATE_CLIBFUZZER_H
#define LOCGATE_CLIBFUZZER_H

#include <stddef.h>
#include <stdint.h>

/// Runs libFuzzer with the process's arguments and `callback` as the target; returns the exit status.
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));

#endif
