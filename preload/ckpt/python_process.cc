#include "preload/ckpt/python_process.h"

#include <dlfcn.h>

namespace ft::preload::agent {
namespace {

using IntQuery = int (*)();

IntQuery Lookup(const char* name) { return reinterpret_cast<IntQuery>(dlsym(RTLD_DEFAULT, name)); }

}  // namespace

bool InPythonProcess() { return Lookup("Py_IsInitialized") != nullptr; }

bool PythonShuttingDown() {
  IntQuery initialized = Lookup("Py_IsInitialized");
  if (initialized == nullptr) return false;  // not a Python process
  if (initialized() == 0) return true;
  // Both read a flag and need no GIL: safe from any thread, the interpreter's or not.
  IntQuery finalizing = Lookup("Py_IsFinalizing");  // 3.13 on
  if (finalizing == nullptr) finalizing = Lookup("_Py_IsFinalizing");
  return finalizing == nullptr || finalizing() != 0;
}

}  // namespace ft::preload::agent
