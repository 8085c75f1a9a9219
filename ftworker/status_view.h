// `ftworker status`: the local view of one job's ranks on this node, read straight from their
// segments. Reads only (no ring records consumed, no commands posted), so it is safe next to
// the running worker.
#ifndef FT_FTWORKER_STATUS_VIEW_H_
#define FT_FTWORKER_STATUS_VIEW_H_

#include <string>
#include <string_view>

namespace ft::worker {

// A text table (or JSON lines with json = true) of every segment of `job` under `shm_dir`.
std::string LocalStatus(std::string_view job, const std::string& shm_dir, bool json);

}  // namespace ft::worker

#endif  // FT_FTWORKER_STATUS_VIEW_H_
