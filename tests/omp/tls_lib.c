/* See tls_lib.h. */
#include "tls_lib.h"

static __thread long tls_lib_state;

void tls_lib_set(long value) { tls_lib_state = value; }
long tls_lib_get(void) { return tls_lib_state; }
const void* tls_lib_address(void) { return &tls_lib_state; }
