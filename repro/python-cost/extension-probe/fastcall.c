// Prototype (not production): a CPython extension function that calls
// symmem_collective directly, METH_FASTCALL, GIL released around the call.
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
int symmem_collective(uint64_t group, uint64_t call, const void* in, void* out, size_t count, void* stream);

static PyObject* collective(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  (void)self;
  if (nargs != 6) {
    PyErr_SetString(PyExc_TypeError, "collective takes 6 arguments");
    return NULL;
  }
  uint64_t v[6];
  for (int i = 0; i < 6; i++) {
    v[i] = PyLong_AsUnsignedLongLong(args[i]);
    if (v[i] == (uint64_t)-1 && PyErr_Occurred()) return NULL;
  }
  int r;
  Py_BEGIN_ALLOW_THREADS
  r = symmem_collective(v[0], v[1], (const void*)v[2], (void*)v[3], (size_t)v[4], (void*)v[5]);
  Py_END_ALLOW_THREADS
  return PyLong_FromLong(r);
}

static PyMethodDef methods[] = {{"collective", (PyCFunction)(void (*)(void))collective, METH_FASTCALL, NULL}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "fastcall", NULL, -1, methods};
PyMODINIT_FUNC PyInit_fastcall(void) { return PyModule_Create(&mod); }
