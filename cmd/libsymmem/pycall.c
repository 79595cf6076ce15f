// The Python package's collective entry: a C function that the package
// turns into a builtin function object (METH_FASTCALL, through
// ctypes.pythonapi.PyCFunction_NewEx), so a collective call costs what a
// call of a builtin costs instead of a ctypes call (results/
// python-cost-2026-11-24.md). It reaches Python's C API only through the
// function pointers symmem_py_bind receives from the package: the library
// needs neither Python's headers nor its symbols, and Python objects are
// opaque here.
#include <stddef.h>
#include <stdint.h>

#include "../../include/symmem.h"  // symmem_collective: the Go export

// Python's C API functions, in symmem_py_bind's order (stable ABI).
static struct {
  unsigned long long (*as_u64)(void*);      // PyLong_AsUnsignedLongLong
  void* (*err_occurred)(void);              // PyErr_Occurred
  void* (*from_long)(long);                 // PyLong_FromLong
  void* (*save_thread)(void);               // PyEval_SaveThread
  void (*restore_thread)(void*);            // PyEval_RestoreThread
  void (*set_string)(void*, const char*);   // PyErr_SetString
  void* type_error;                         // PyExc_TypeError
} py;

enum { PY_API = 7 };

int symmem_py_bind(void* const* api, int n) {
  if (api == NULL || n != PY_API) {
    return SYMMEM_ERR_INVALID;
  }
  for (int i = 0; i < PY_API; i++) {
    if (api[i] == NULL) {
      return SYMMEM_ERR_INVALID;
    }
  }
  py.as_u64 = (unsigned long long (*)(void*))api[0];
  py.err_occurred = (void* (*)(void))api[1];
  py.from_long = (void* (*)(long))api[2];
  py.save_thread = (void* (*)(void))api[3];
  py.restore_thread = (void (*)(void*))api[4];
  py.set_string = (void (*)(void*, const char*))api[5];
  py.type_error = api[6];
  return SYMMEM_OK;
}

void* symmem_py_collective(void* self, void* const* args, ptrdiff_t nargs) {
  (void)self;
  if (py.from_long == NULL) {
    return NULL;  // never bound: Python reports an error return without an exception
  }
  if (nargs != 6) {
    py.set_string(py.type_error, "symmem_collective takes 6 arguments: group, call, in, out, count, stream");
    return NULL;
  }
  uint64_t v[6];
  for (int i = 0; i < 6; i++) {
    v[i] = py.as_u64(args[i]);
    if (v[i] == (uint64_t)-1 && py.err_occurred() != NULL) {
      return NULL;  // not an int, or out of range: Python's error stands
    }
  }
  // Other Python threads run while the call waits (the CPU backend waits
  // for its peers).
  void* ts = py.save_thread();
  int r = symmem_collective(v[0], v[1], (void*)(uintptr_t)v[2], (void*)(uintptr_t)v[3], (size_t)v[4],
                            (void*)(uintptr_t)v[5]);
  py.restore_thread(ts);
  return py.from_long(r);
}
