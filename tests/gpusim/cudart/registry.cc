// Module registration (what nvcc's static initialisers call) and the CPU kernel bodies that
// GPUSIM_KERNEL_LIBS provides. A kernel record maps a host stub to the device name; its body
// is found once, at its first launch, by exact device name or by demangled identifier.
#include <cxxabi.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <unordered_map>
#include <unordered_set>

#include "runtime.h"

namespace gpusim {
namespace {

struct Module {
  void* fatbin;
};

struct Registry {
  std::mutex mu;
  std::unordered_map<const void*, CUkern_st*> by_stub;       // GUARDED_BY(mu)
  std::unordered_set<const CUkern_st*> records;              // GUARDED_BY(mu), never shrinks
  std::unordered_map<const void*, size_t> vars;              // host shadow -> size
  std::unordered_map<std::string, const KernelBody*> bodies;  // name -> body, never freed
};

Registry& R() {
  static auto* r = new Registry;  // leaked: launches may run while statics are destroyed
  return *r;
}

// Loading the kernel libraries runs their code: done under its own lock, never under R().mu,
// so a library may call back into the runtime.
std::mutex* g_load_mu = new std::mutex;
std::atomic<bool> g_loaded{false};

void RegisterBody(const char* name, gpusim_kernel_fn fn, const size_t* sizes, int nargs) {
  if (!name || !fn || nargs < 0 || (nargs > 0 && !sizes)) {
    Warn("gpusim_register_kernels: bad registration for %s ignored", name ? name : "(null)");
    return;
  }
  auto* b = new KernelBody;
  b->name = name;
  b->fn = fn;
  size_t off = 0;
  for (int i = 0; i < nargs; ++i) {
    // Natural alignment up to 16 bytes, so a body may read its arguments in place.
    size_t a = 1;
    while (a < 16 && sizes[i] % (a * 2) == 0) a *= 2;
    off = (off + a - 1) / a * a;
    b->offsets.push_back(off);
    b->sizes.push_back(sizes[i]);
    off += sizes[i];
  }
  b->total = off;
  std::lock_guard<std::mutex> lk(R().mu);
  R().bodies[b->name] = b;  // a later registration of the same name wins
}

void LoadKernelLibs() {
  if (g_loaded.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lk(*g_load_mu);
  if (g_loaded.load(std::memory_order_relaxed)) return;
  const std::string& libs = GetConfig().kernel_libs;
  size_t start = 0;
  while (start <= libs.size()) {
    size_t end = libs.find(':', start);
    if (end == std::string::npos) end = libs.size();
    std::string path = libs.substr(start, end - start);
    start = end + 1;
    if (path.empty()) continue;
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      Warn("GPUSIM_KERNEL_LIBS: cannot load %s: %s", path.c_str(), dlerror());
      continue;
    }
    auto reg = reinterpret_cast<void (*)(gpusim_register_fn)>(dlsym(h, "gpusim_register_kernels"));
    if (!reg) {
      Warn("GPUSIM_KERNEL_LIBS: %s has no gpusim_register_kernels", path.c_str());
      continue;
    }
    reg(RegisterBody);
  }
  g_loaded.store(true, std::memory_order_release);
}

// Names to try for a device name, best first: as registered; demangled with parameters;
// the identifier without parameters ("ns::scale<float>"); without template arguments
// ("ns::scale"); the last two without "(anonymous namespace)::".
std::vector<std::string> Candidates(const std::string& mangled) {
  std::vector<std::string> out{mangled};
  int status = 0;
  char* d = abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status);
  if (status != 0 || !d) {
    free(d);
    return out;
  }
  std::string full = d;
  free(d);
  out.push_back(full);
  static const std::string kAnon = "(anonymous namespace)";
  // Cut at the parameter list: the first '(' outside template arguments that does not open
  // "(anonymous namespace)"; drop a return type (templates have one): text before the last
  // space outside template arguments.
  std::string id;
  int depth = 0;
  size_t cut = full.size(), last_space = std::string::npos;
  for (size_t i = 0; i < full.size(); ++i) {
    char c = full[i];
    if (c == '<') ++depth;
    if (c == '>') --depth;
    if (depth != 0) continue;
    if (c == '(' && full.compare(i, kAnon.size(), kAnon) == 0) {
      i += kAnon.size() - 1;
      continue;
    }
    if (c == '(') {
      cut = i;
      break;
    }
    if (c == ' ') last_space = i;
  }
  id = full.substr(0, cut);
  if (last_space != std::string::npos && last_space < cut) id = id.substr(last_space + 1);
  out.push_back(id);
  std::string plain;
  depth = 0;
  for (char c : id) {
    if (c == '<') ++depth;
    if (depth == 0) plain += c;
    if (c == '>') --depth;
  }
  if (plain != id) out.push_back(plain);
  for (std::string s : {id, plain}) {
    if (s.compare(0, kAnon.size() + 2, kAnon + "::") == 0) out.push_back(s.substr(kAnon.size() + 2));
  }
  return out;
}

}  // namespace

CUkern_st* FindKernel(const void* f) {
  if (!f) return nullptr;
  std::lock_guard<std::mutex> lk(R().mu);
  auto it = R().by_stub.find(f);
  if (it != R().by_stub.end()) return it->second;
  // A cudaKernel_t / cudaFunction_t passed where a function is expected (CUDA allows it).
  auto* k = static_cast<CUkern_st*>(const_cast<void*>(f));
  return R().records.count(k) ? k : nullptr;
}

const KernelBody* ResolveBody(CUkern_st* k) {
  if (k->resolved.load(std::memory_order_acquire)) return k->body.load(std::memory_order_relaxed);
  LoadKernelLibs();
  std::vector<std::string> names = Candidates(k->device_name);
  const KernelBody* body = nullptr;
  {
    std::lock_guard<std::mutex> lk(R().mu);
    for (const std::string& n : names) {
      auto it = R().bodies.find(n);
      if (it != R().bodies.end()) {
        body = it->second;
        break;
      }
    }
  }
  k->body.store(body, std::memory_order_relaxed);
  k->resolved.store(true, std::memory_order_release);
  return body;
}

const char* KernelName(CUkern_st* k) { return k->device_name.c_str(); }

bool LookupSymbol(const void* symbol, size_t* size) {
  std::lock_guard<std::mutex> lk(R().mu);
  auto it = R().vars.find(symbol);
  if (it == R().vars.end()) return false;
  *size = it->second;
  return true;
}

bool InSymbol(const void* p) {
  const auto* at = static_cast<const char*>(p);
  std::lock_guard<std::mutex> lk(R().mu);
  for (const auto& [shadow, size] : R().vars) {
    const auto* base = static_cast<const char*>(shadow);
    if (at >= base && at < base + std::max<size_t>(size, 1)) return true;
  }
  return false;
}

void LockRegistryForFork() { R().mu.lock(); }
void UnlockRegistryForFork(bool child) {
  R().mu.unlock();
  // A thread that was loading kernel libraries does not exist in the child.
  if (child && !g_loaded.load()) new (g_load_mu) std::mutex;
}

}  // namespace gpusim

using namespace gpusim;

GPUSIM_API void** __cudaRegisterFatBinary(void* fatbin) {
  return reinterpret_cast<void**>(new Module{fatbin});
}

GPUSIM_API void __cudaRegisterFatBinaryEnd(void**) {}

GPUSIM_API void __cudaUnregisterFatBinary(void** handle) {
  // Runs from atexit or dlclose. The stubs may be reused by another library later, so forget
  // them; the records stay valid because programs cache their handles.
  std::lock_guard<std::mutex> lk(R().mu);
  for (auto it = R().by_stub.begin(); it != R().by_stub.end();) {
    if (it->second->module == handle)
      it = R().by_stub.erase(it);
    else
      ++it;
  }
}

GPUSIM_API char __cudaInitModule(void**) { return 1; }

GPUSIM_API void __cudaRegisterFunction(void** handle, const char* host_fun, char* device_fun,
                                       const char* device_name, int, uint3*, uint3*, dim3*, dim3*,
                                       int*) {
  auto* k = new CUkern_st;
  k->host_stub = host_fun;
  k->module = handle;
  k->device_name = device_name ? device_name : (device_fun ? device_fun : "");
  std::lock_guard<std::mutex> lk(R().mu);
  R().by_stub[host_fun] = k;
  R().records.insert(k);
}

GPUSIM_API void __cudaRegisterVar(void**, char* host_var, char*, const char*, int, size_t size, int,
                                  int) {
  // The host shadow of a __device__ variable becomes its storage: cudaMemcpyToSymbol and
  // cudaGetSymbolAddress address it, and kernel bodies may use that address.
  std::lock_guard<std::mutex> lk(R().mu);
  R().vars[host_var] = size;
}

GPUSIM_API void __cudaRegisterManagedVar(void**, void** host_var_ptr, char*, const char*, int,
                                         size_t size, int, int) {
  // Host code reaches a __managed__ variable through *host_var_ptr.
  if (host_var_ptr && !*host_var_ptr) *host_var_ptr = calloc(1, size ? size : 1);
  std::lock_guard<std::mutex> lk(R().mu);
  if (host_var_ptr) R().vars[*host_var_ptr] = size;
}

// Texture and surface references are gone from CUDA 12+ device code; accepted and ignored.
GPUSIM_API void __cudaRegisterTexture(void**, const void*, const void**, const char*,
                                      int, int, int) {}
GPUSIM_API void __cudaRegisterSurface(void**, const void*, const void**, const char*,
                                      int, int) {}

// Exported by the real runtime, declared in no header, not emitted by nvcc for ordinary
// programs: accepted and ignored whatever they pass.
GPUSIM_API void __cudaRegisterHostVar(...) {}
GPUSIM_API void __cudaRegisterUnifiedTable(...) {}

GPUSIM_API cudaError_t __cudaGetKernel(cudaKernel_t* out, const void* stub) {
  if (!out) return Ret(cudaErrorInvalidValue);
  CUkern_st* k = FindKernel(stub);
  if (!k) return Ret(cudaErrorInvalidDeviceFunction);
  *out = k;
  return cudaSuccess;
}

GPUSIM_API cudaError_t cudaGetKernel(cudaKernel_t* out, const void* entry) {
  return __cudaGetKernel(out, entry);
}

GPUSIM_API cudaError_t cudaGetFuncBySymbol(cudaFunction_t* out, const void* symbol) {
  if (!out) return Ret(cudaErrorInvalidValue);
  CUkern_st* k = FindKernel(symbol);
  if (!k) return Ret(cudaErrorInvalidDeviceFunction);
  *out = reinterpret_cast<cudaFunction_t>(k);
  return cudaSuccess;
}

GPUSIM_API cudaError_t cudaFuncGetName(const char** name, const void* func) {
  if (!name) return Ret(cudaErrorInvalidValue);
  CUkern_st* k = FindKernel(func);
  if (!k) return Ret(cudaErrorInvalidDeviceFunction);
  *name = KernelName(k);
  return cudaSuccess;
}

GPUSIM_API cudaError_t cudaFuncGetParamInfo(const void* func, size_t index, size_t* offset,
                                            size_t* size) {
  // Known only for kernels with a CPU body: their registration carries the argument sizes.
  CUkern_st* k = FindKernel(func);
  if (!k) return Ret(cudaErrorInvalidDeviceFunction);
  const KernelBody* b = ResolveBody(k);
  if (!b) return Ret(cudaErrorNotSupported);
  if (index >= b->sizes.size()) return Ret(cudaErrorInvalidValue);
  if (offset) *offset = b->offsets[index];
  if (size) *size = b->sizes[index];
  return cudaSuccess;
}
