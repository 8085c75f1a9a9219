// ft::ckpt::PopulateForWrite: maps every page of a shared file mapping writable now, so the
// first save into a host arena runs at copy bandwidth instead of taking a page fault per 4 KiB.
//
// Why not MAP_POPULATE: on a tmpfs mapping it faults the pages in one at a time, 0.21-0.97 s per
// GiB on the 2-vCPU development VM, where MADV_POPULATE_WRITE (Linux 5.14) took 0.12-0.28 s on
// one thread and 0.07-0.14 s split over two (alternating runs, 2026-12-03). Where the kernel
// lacks it, each page gets one atomic add of zero: a write fault that changes no byte, so a
// reader of a committed copy in the same file reads what it read before. (A hypervisor that
// charges each process's first touch of a page, as that VM's does, still charges it later:
// populating maps the guest's pages, not the host's.)
#ifndef FT_JITCKPT_POPULATE_H_
#define FT_JITCKPT_POPULATE_H_

#include <cstdint>

namespace ft::ckpt {

// `base` page-aligned; `threads` <= 0: one per hardware thread, at most 8. Best effort: a
// thread that cannot start leaves its range to fault in at first use.
void PopulateForWrite(uint8_t* base, uint64_t bytes, int threads = 0);

// Reads one word of every page in [base, base + bytes): the process's first access to each page
// of a mapping, paid now rather than by the first save or restore that reads or writes it.
// Populating is not enough where a hypervisor maps the guest's page tables for itself (shadow
// paging, as on the 2-vCPU development VM): there every page's first access through a new
// mapping costs ~5 us however the guest mapped it — 1.3-1.5 s per GiB through a writable
// shared mapping after MADV_POPULATE_WRITE, against 0.07 s for the same access once touched
// (2026-12-05); the first save into a slot took 2 s per GiB, a termination save 1.6. On a host
// without it the pass reads a cache line per page: a few milliseconds per GiB. Reads only, so
// a reader of a committed copy in the same file sees nothing change. `base` page-aligned.
void TouchPages(const uint8_t* base, uint64_t bytes);

}  // namespace ft::ckpt

#endif  // FT_JITCKPT_POPULATE_H_
