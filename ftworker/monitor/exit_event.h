// How a rank's end reads in its exit event: which of what the worker knows decides (a clean
// exit; a stop it sent; a launcher's SIGTERM, i.e. a teardown; a failing status through
// libft.so's exit path; what the kernel says of a zombie; the last status written; nothing),
// the event's code and its message for people. Pure but for logging the message; any thread.
#ifndef FT_FTWORKER_EXIT_EVENT_H_
#define FT_FTWORKER_EXIT_EVENT_H_

#include <cstdint>
#include <optional>

#include "proto/messages.h"

namespace ft::worker {

struct RankEnd {
  int rank = -1;
  int pid = 0;
  proto::RankState life = proto::RankState::kDead;  // kExited, kDead or kStopped
  int32_t status = 0;                // the exit status the process wrote in its header
  int32_t term = 0;                  // the terminating signal libft.so recorded (only 1..127 count)
  bool exited_itself = false;        // it ended through libft.so's exit path
  std::optional<int> wait_status;    // a zombie's, as waitpid(2) would report it
};

// Sets the exit event's clean, code, status_unknown and message, and logs the message. A zombie
// killed by a signal that asks a process to end (SIGTERM, SIGINT, SIGHUP) that libft.so did not
// record also sets terminated_by_signal (and terminate_unix_ms: the event's time): a teardown.
void DescribeEnd(const RankEnd& end, proto::Event* event);

}  // namespace ft::worker

#endif  // FT_FTWORKER_EXIT_EVENT_H_
