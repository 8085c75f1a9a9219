// The checkpoint agent and the memory the app gives back (ckpt_agent.h, NoteMemoryFreed). A
// save copies the registered buffers and a restore writes into them; once the app freed one,
// both would touch memory it no longer owns: a fault (the exit save of a program that freed
// its buffers before failing), or — worse — another allocation's bytes committed as this
// rank's state, or written over by a restore. So a freed buffer stops both, with its name.
#include <algorithm>
#include <atomic>
#include <string>

#include "common/log.h"
#include "common/mutex.h"
#include "preload/ckpt/ckpt_agent.h"
#include "preload/ckpt/ckpt_agent_impl.h"

namespace ft::preload::agent {

namespace {
std::atomic<bool> g_registered{false};
}  // namespace

void NoteRegistration() { g_registered.store(true, std::memory_order_release); }

void NoteMemoryFreed(const void* ptr, uint64_t bytes) noexcept {
  if (!g_registered.load(std::memory_order_acquire) || ptr == nullptr) return;
  try {
    TheAgent().NoteFreed(ptr, bytes);
  } catch (...) {
  }
}

void Agent::NoteFreed(const void* ptr, uint64_t bytes) {
  const auto begin = reinterpret_cast<uintptr_t>(ptr);
  const uintptr_t end = begin + std::max<uint64_t>(bytes, 1);
  std::string name;
  {
    MutexLock lock(&mu_);
    if (!freed_buffer_.empty()) return;  // saves are refused already
    for (const Registered& b : buffers_) {
      const auto at = reinterpret_cast<uintptr_t>(b.ptr);
      if (at < end && begin < at + b.bytes) {
        freed_buffer_ = name = b.name;
        break;
      }
    }
  }
  if (!name.empty()) {
    FT_LOG(Warn, Ckpt,
           "the registered buffer '{}' was freed by the app: no save or restore from now on in this process "
           "(the arena keeps its committed copy)",
           name);
  }
}

std::string Agent::FreedBufferLocked() const {
  if (freed_buffer_.empty()) return {};
  // Names run to 255 bytes and an ack holds 96: the name is cut, the reason is not.
  constexpr size_t kNameRoom = 40;
  const std::string name = freed_buffer_.size() > kNameRoom ? freed_buffer_.substr(0, kNameRoom) + "..." : freed_buffer_;
  return "buffer '" + name + "' was freed by the app: nothing copied";
}

std::string Agent::FreedBuffer() {
  MutexLock lock(&mu_);
  return FreedBufferLocked();
}

}  // namespace ft::preload::agent
