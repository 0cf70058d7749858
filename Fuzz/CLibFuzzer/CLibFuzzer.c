// SwiftPM builds a C target only from at least one source file; the header is the whole module.
#include "CLibFuzzer.h"
