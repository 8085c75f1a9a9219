#include "preload/real.h"

#include <dlfcn.h>
#include <link.h>

#include <cstring>
#include <memory>
#include <new>
#include <utility>

namespace ft::preload {
namespace {

constexpr const char* kNcclNames[] = {
#define FT_NCCL(ret, name, params, args, kind) #name,
#include "shm/nccl.def"
#undef FT_NCCL
};

constexpr const char* kCudaNames[] = {
#define FT_CUDA(ret, name, params, args, kind) #name,
#define FT_CUDA_REAL(ret, name, params) #name,
#include "shm/cudart.def"
#undef FT_CUDA
#undef FT_CUDA_REAL
};

constexpr size_t kNcclCount = static_cast<size_t>(NcclSym::kCount);
constexpr size_t kCudaCount = static_cast<size_t>(CudaSym::kCount);

// Objects loaded so far (dl_iterate_phdr's dlpi_adds): a miss stays a miss until it moves.
int CountAdds(struct dl_phdr_info* info, size_t size, void* out) {
  if (size >= offsetof(struct dl_phdr_info, dlpi_adds) + sizeof(info->dlpi_adds)) {
    *static_cast<unsigned long long*>(out) = info->dlpi_adds;
  }
  return 1;  // the first object carries the process-wide count
}

unsigned long long LoadedObjects() {
  unsigned long long adds = 0;
  dl_iterate_phdr(CountAdds, &adds);
  return adds;
}

// libft.so's own load address: a lookup that lands here would call our wrapper again.
uintptr_t OwnBase() {
  static const uintptr_t base = [] {
    Dl_info info{};
    return dladdr(reinterpret_cast<void*>(&LoadedObjects), &info) != 0
               ? reinterpret_cast<uintptr_t>(info.dli_fbase)
               : uintptr_t{0};
  }();
  return base;
}

bool IsOurs(void* p) {
  Dl_info info{};
  return dladdr(p, &info) != 0 && reinterpret_cast<uintptr_t>(info.dli_fbase) == OwnBase();
}

// A library loaded RTLD_LOCAL after us is not in the scope RTLD_NEXT searches; look it up by
// soname among what is already loaded (RTLD_NOLOAD never loads anything). The handle is kept
// open when a symbol is taken from it, so the library cannot go while we hold its function.
void* FromLoaded(const char* soname, const char* name) {
  void* handle = dlopen(soname, RTLD_LAZY | RTLD_NOLOAD);
  if (handle == nullptr) return nullptr;
  void* p = dlsym(handle, name);
  if (p == nullptr || IsOurs(p)) {
    dlclose(handle);
    return nullptr;
  }
  return p;
}

// Every loaded object, as load addresses (the loader's lock is held during dl_iterate_phdr, so
// nothing may be dlopen'ed there: collect first, look up after). Ones whose file name contains
// `prefer` come first. Fixed capacity: no allocation.
struct Objects {
  static constexpr size_t kMax = 2048;
  const char* prefer = nullptr;
  uintptr_t bases[kMax];
  size_t preferred = 0;
  size_t n = 0;
};

int CollectObject(struct dl_phdr_info* info, size_t, void* out) {
  auto* objects = static_cast<Objects*>(out);
  if (info->dlpi_name == nullptr || info->dlpi_name[0] == '\0') return 0;  // the program
  if (objects->n == Objects::kMax) return 1;
  uintptr_t base = static_cast<uintptr_t>(info->dlpi_addr);
  if (base == OwnBase()) return 0;
  objects->bases[objects->n++] = base;
  if (std::strstr(info->dlpi_name, objects->prefer) != nullptr) {
    // Swap into the preferred prefix, keeping load order among the preferred ones.
    std::swap(objects->bases[objects->preferred], objects->bases[objects->n - 1]);
    ++objects->preferred;
  }
  return 0;
}

// Rare (a miss, once per set of loaded objects): 16 KiB from the heap rather than any thread's
// stack, and no lock (dlopen below takes the loader's lock, which a thread waiting on ours
// could hold).
void* FromAnyLoaded(const char* prefer, const char* const* names, size_t n_names) {
  std::unique_ptr<Objects> holder(new (std::nothrow) Objects);
  if (holder == nullptr) return nullptr;
  Objects& objects = *holder;
  objects.prefer = prefer;
  objects.n = objects.preferred = 0;
  dl_iterate_phdr(CollectObject, &objects);
  for (size_t i = 0; i < objects.n; ++i) {
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(objects.bases[i]), &info) == 0 || info.dli_fname == nullptr) {
      continue;
    }
    void* handle = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    if (handle == nullptr) continue;
    for (size_t k = 0; k < n_names; ++k) {
      void* p = dlsym(handle, names[k]);
      if (p != nullptr && !IsOurs(p)) return p;  // the handle stays open, see FromLoaded
    }
    dlclose(handle);
  }
  return nullptr;
}

void* LookupNccl(size_t i) {
  const char* name = kNcclNames[i];
  char profiled[128] = "p";  // the strong pnccl* alias
  std::strncat(profiled, name, sizeof(profiled) - 2);
  void* p = dlsym(RTLD_NEXT, profiled);
  if (p == nullptr) p = dlsym(RTLD_NEXT, name);
  if (p == nullptr) p = FromLoaded("libnccl.so.2", profiled);
  if (p == nullptr) p = FromLoaded("libnccl.so.2", name);
  if (p == nullptr) {
    const char* names[] = {profiled, name};
    p = FromAnyLoaded("nccl", names, 2);
  }
  return p;
}

void* LookupCuda(size_t i) {
  const char* name = kCudaNames[i];
  void* p = dlsym(RTLD_NEXT, name);
  if (p == nullptr) p = FromLoaded("libcudart.so.13", name);
  if (p == nullptr) p = FromAnyLoaded("cudart", &name, 1);
  return p;
}

// Per symbol: the object count at its last miss, plus one (0: never looked up).
std::atomic<unsigned long long> g_nccl_missed[kNcclCount];
std::atomic<unsigned long long> g_cuda_missed[kCudaCount];

void* Resolve(std::atomic<void*>* table, std::atomic<unsigned long long>* missed, size_t i,
              void* (*lookup)(size_t)) {
  void* p = table[i].load(std::memory_order_acquire);
  if (p != nullptr) return p;
  unsigned long long loaded = LoadedObjects();
  if (missed[i].load(std::memory_order_acquire) == loaded + 1) return nullptr;  // nothing new
  p = lookup(i);
  if (p != nullptr) {
    table[i].store(p, std::memory_order_release);
  } else {
    missed[i].store(loaded + 1, std::memory_order_release);
  }
  return p;
}

}  // namespace

namespace detail {

std::atomic<void*> g_nccl_real[kNcclCount];
std::atomic<void*> g_cuda_real[kCudaCount];

void* ResolveNccl(NcclSym sym) {
  return Resolve(g_nccl_real, g_nccl_missed, static_cast<size_t>(sym), LookupNccl);
}

void* ResolveCuda(CudaSym sym) {
  return Resolve(g_cuda_real, g_cuda_missed, static_cast<size_t>(sym), LookupCuda);
}

}  // namespace detail

const char* NcclSymName(NcclSym sym) { return kNcclNames[static_cast<size_t>(sym)]; }
const char* CudaSymName(CudaSym sym) { return kCudaNames[static_cast<size_t>(sym)]; }

}  // namespace ft::preload
