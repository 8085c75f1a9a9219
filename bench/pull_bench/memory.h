// The bench's big buffers: anonymous mappings, huge pages advised (as a checkpoint arena is),
// every page touched before any timing so no figure includes page faults.
#ifndef FT_BENCH_PULL_BENCH_MEMORY_H_
#define FT_BENCH_PULL_BENCH_MEMORY_H_

#include <cstdint>
#include <string>

namespace ft::bench {

class Buffer {
 public:
  Buffer() = default;
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  // Maps `bytes` and writes zeros over them. False, with why, when the mapping fails.
  bool Allocate(uint64_t bytes, std::string* why);
  uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }

 private:
  uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

// The served content: 64-bit words that depend on their offset, so bytes landed at the wrong
// place fail their chunk's checksum. Two threads (the machine has two cores).
void FillPattern(uint8_t* data, uint64_t bytes);

}  // namespace ft::bench

#endif  // FT_BENCH_PULL_BENCH_MEMORY_H_
