// C parts of the ABI: the per-thread last error, and what Go may not do.
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../../include/symmem.h"
#include "abi.h"

// One heap buffer per thread under a pthread key (freed when the thread
// exits): a caller reads the message on the thread whose call failed,
// whatever other threads do meanwhile. A key rather than _Thread_local
// storage: a library loaded with dlopen (ctypes) gets little static TLS.
static pthread_key_t key;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void make_key(void) { pthread_key_create(&key, free); }

void symmemSetError(const char* msg, size_t n) {
  pthread_once(&once, make_key);
  char* old = pthread_getspecific(key);
  char* buf = realloc(old, n + 1);
  if (buf == NULL) {
    return;  // keep the old message rather than none
  }
  if (n > 0) {
    memcpy(buf, msg, n);
  }
  buf[n] = 0;
  pthread_setspecific(key, buf);
}

const char* symmem_last_error(void) {
  pthread_once(&once, make_key);
  const char* s = pthread_getspecific(key);
  return s != NULL ? s : "";
}

void* symmemPtr(uintptr_t addr) { return (void*)addr; }
