// The baseline of `make bench-pull`: the best a plain single-stream TCP socket does with the same
// bytes. The sender writes the whole buffer with large blocking writes; the receiver reads
// straight into its destination with large reads. No framing, no checksum, kernel defaults for
// the socket buffers (autotuning), Nagle's algorithm off on both ends.
//
// Request on the wire: the u64 byte count (little-endian) the receiver wants from offset 0.
#ifndef FT_BENCH_PULL_BENCH_SOCKET_COPY_H_
#define FT_BENCH_PULL_BENCH_SOCKET_COPY_H_

#include <cstdint>
#include <string>
#include <thread>

namespace ft::bench {

// Serves `data` to one receiver at a time on address:port (port 0: any free one) from its own
// thread, until Stop().
class SocketSender {
 public:
  SocketSender(const uint8_t* data, uint64_t size) : data_(data), size_(size) {}
  ~SocketSender() { Stop(); }
  SocketSender(const SocketSender&) = delete;
  SocketSender& operator=(const SocketSender&) = delete;

  bool Start(const std::string& address, std::string* why);
  uint16_t port() const { return port_; }
  void Stop();

 private:
  void Serve();

  const uint8_t* data_;
  uint64_t size_;
  int listener_ = -1;
  uint16_t port_ = 0;
  std::thread thread_;
};

struct SocketCopyResult {
  double seconds = 0;        // connect -> last byte in
  double first_byte_ms = 0;  // request sent -> first byte in
};

// Connects to address:port, asks for `bytes` and reads them into dest. False, with why, on any
// failure (a short read included).
bool ReceiveCopy(const std::string& address, uint16_t port, uint8_t* dest, uint64_t bytes, SocketCopyResult* out,
                 std::string* why);

}  // namespace ft::bench

#endif  // FT_BENCH_PULL_BENCH_SOCKET_COPY_H_
