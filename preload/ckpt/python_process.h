// libft.so internal: whether the process runs a Python interpreter, and whether it is shutting
// down. A Python process takes no save at a failing exit (its interpreter has finalized, and
// the registered tensors may be freed: ft_save_on_failure's save comes first, from Python), and
// a terminate's save only while the interpreter runs (ckpt_agent_term.cc, ckpt_agent_thread.cc).
// Both read what the interpreter exports (dlsym in the global scope): no link to libpython.
#ifndef FT_PRELOAD_CKPT_PYTHON_PROCESS_H_
#define FT_PRELOAD_CKPT_PYTHON_PROCESS_H_

namespace ft::preload::agent {

// A Python interpreter is loaded in this process (it exports Py_IsInitialized).
bool InPythonProcess();
// A Python process whose interpreter is not initialized or is finalizing; false where no
// Python is loaded. A Python that answers neither question counts as shutting down.
bool PythonShuttingDown();

}  // namespace ft::preload::agent

#endif  // FT_PRELOAD_CKPT_PYTHON_PROCESS_H_
