#include "cudart.h"

#include <dlfcn.h>

#include <mutex>
#include <string>

namespace gpusim::nccl {
namespace {

struct Loaded {
  CudaRt rt;
  bool ok = false;
  std::string why;
};

Loaded* Load() {
  auto* l = new Loaded();  // lives for the process
  void* h = dlopen("libcudart.so.13", RTLD_NOW | RTLD_GLOBAL);
  if (h == nullptr) {
    const char* e = dlerror();
    l->why = std::string("cannot load libcudart.so.13: ") + (e ? e : "unknown error");
    return l;
  }
  l->rt.LaunchHostFunc = reinterpret_cast<decltype(l->rt.LaunchHostFunc)>(dlsym(h, "cudaLaunchHostFunc"));
  l->rt.StreamIsCapturing =
      reinterpret_cast<decltype(l->rt.StreamIsCapturing)>(dlsym(h, "cudaStreamIsCapturing"));
  l->rt.GetDevice = reinterpret_cast<decltype(l->rt.GetDevice)>(dlsym(h, "cudaGetDevice"));
  l->rt.GetErrorString =
      reinterpret_cast<decltype(l->rt.GetErrorString)>(dlsym(h, "cudaGetErrorString"));
  if (l->rt.LaunchHostFunc == nullptr) {
    l->why = "libcudart.so.13 has no cudaLaunchHostFunc";
    return l;
  }
  l->ok = true;
  return l;
}

}  // namespace

const CudaRt* GetCudaRt(const char** why) {
  static Loaded* loaded = nullptr;
  static std::once_flag once;
  std::call_once(once, [] { loaded = Load(); });
  if (!loaded->ok) {
    if (why != nullptr) *why = loaded->why.c_str();
    return nullptr;
  }
  return &loaded->rt;
}

}  // namespace gpusim::nccl
