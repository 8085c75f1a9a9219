// Socket options of the transfer engine's TCP connections, in one place so that the server and
// the client agree and a measurement changes one line (docs/transfer-protocol.md, "Speed").
#ifndef FT_TRANSFER_ENGINE_TCP_SOCKET_TUNING_H_
#define FT_TRANSFER_ENGINE_TCP_SOCKET_TUNING_H_

namespace ft::rdma {

enum class SocketRole { kServer, kClient };

// Best effort: a refused option costs speed, never correctness, so failures are ignored.
void TuneSocket(int fd, SocketRole role);

}  // namespace ft::rdma

#endif  // FT_TRANSFER_ENGINE_TCP_SOCKET_TUNING_H_
