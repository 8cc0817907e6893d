// The one function that frees what `nest::guarded` (guard.h) allocated.

#include <cstdlib>

extern "C" void nest_free_message(char* m) { std::free(m); }
