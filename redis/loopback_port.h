// A TCP port on 127.0.0.1 that nothing listens on now, for a private redis-server (ftmaster's
// embedded one, the tests' own). Another process may take it before the server binds it:
// callers retry with a fresh one when the server fails to start.
#ifndef FT_REDIS_LOOPBACK_PORT_H_
#define FT_REDIS_LOOPBACK_PORT_H_

namespace ft::redis {

// 0 when none could be had.
int FreeLoopbackPort();

}  // namespace ft::redis

#endif  // FT_REDIS_LOOPBACK_PORT_H_
