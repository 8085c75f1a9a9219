// libft.so internal: the poller thread, started once by Init. It observes pending ops' events,
// writes progress to the table and ring, the heartbeat, and mailbox acks.
#ifndef FT_PRELOAD_POLLER_H_
#define FT_PRELOAD_POLLER_H_

namespace ft::preload::internal {

// The poller thread's body: runs until g_rt->stop, then sets g_rt->poller_done.
void PollerMain();

}  // namespace ft::preload::internal

#endif  // FT_PRELOAD_POLLER_H_
