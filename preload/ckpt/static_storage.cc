#include "preload/ckpt/static_storage.h"

#include <link.h>

namespace ft::preload::agent {

namespace {

struct Range {
  uintptr_t begin;
  uintptr_t end;
  bool inside = false;
};

int WithinWritableSegment(struct dl_phdr_info* info, size_t, void* data) {
  Range* range = static_cast<Range*>(data);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || (ph.p_flags & PF_W) == 0) continue;
    const uintptr_t begin = info->dlpi_addr + ph.p_vaddr, end = begin + ph.p_memsz;
    if (range->begin >= begin && range->end <= end) {
      range->inside = true;
      return 1;  // found: stops the walk
    }
  }
  return 0;
}

}  // namespace

bool InStaticStorage(const void* ptr, uint64_t bytes) {
  Range range{reinterpret_cast<uintptr_t>(ptr), reinterpret_cast<uintptr_t>(ptr) + bytes};
  if (range.end < range.begin) return false;
  dl_iterate_phdr(WithinWritableSegment, &range);
  return range.inside;
}

}  // namespace ft::preload::agent
