/* A library that keeps state per thread (tls_lib.c, built as a shared
 * library, so its thread-locals are reached the way a real library's are:
 * through the dynamic TLS model, not at a fixed offset from the thread
 * pointer). */
#ifndef WEFT_TESTS_OMP_TLS_LIB_H
#define WEFT_TESTS_OMP_TLS_LIB_H
#ifdef __cplusplus
extern "C" {
#endif
/* Sets the calling thread's state. */
void tls_lib_set(long value);
/* The calling thread's state (0 on a thread that never set it). */
long tls_lib_get(void);
/* Address of the calling thread's state (distinct per thread). */
const void* tls_lib_address(void);
#ifdef __cplusplus
}
#endif
#endif /* WEFT_TESTS_OMP_TLS_LIB_H */
