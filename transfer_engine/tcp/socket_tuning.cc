#include "transfer_engine/tcp/socket_tuning.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

namespace ft::rdma {

void TuneSocket(int fd, SocketRole role) {
  // Requests are 36-byte frames the client pipelines behind each other, and a piece's last
  // partial segment must not wait for an ACK (Nagle + delayed ACK stalls a piece by up to
  // 40 ms). Pieces are written whole with one gathered write, so the kernel still sends full
  // segments without Nagle's help.
  int one = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  // Buffer sizes are left to the kernel's autotuning: on Linux a fixed SO_RCVBUF/SO_SNDBUF turns
  // autotuning off and caps the window at net.core.[rw]mem_max, which is smaller than what
  // autotuning reaches (tcp_rmem max) on a fast link.
  (void)role;
}

}  // namespace ft::rdma
