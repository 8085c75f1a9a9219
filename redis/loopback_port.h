// A TCP port on 127.0.0.1 that nothing listens on now, for a private redis-server (ftmaster's
// embedded one, the tests' own). Another process may take it before the server binds it:
// callers retry with a fresh one when the server fails to start.
#ifndef FT_REDIS_LOOPBACK_PORT_H_
#define FT_REDIS_LOOPBACK_PORT_H_

namespace ft::redis {

// 0 when none could be had.
int FreeLoopbackPort();

// Whether 127.0.0.1:`port` can be bound now (nothing listens on it or holds it).
bool LoopbackPortIsFree(int port);

}  // namespace ft::redis

#endif  // FT_REDIS_LOOPBACK_PORT_H_
