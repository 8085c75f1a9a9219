// master_bench: the real ftmaster as a child process: started with the bench's own FT_*
// settings and its output in a log file, stopped as an operator would. Owned by the trial that
// started it; its destructor stops it.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "bench/master_bench/layout.h"
#include "bench/master_bench/options.h"
#include "common/status.h"

namespace ft::bench {

class Master {
 public:
  ~Master() { Stop(); }

  Status Start(const Options& o, const std::string& job, const std::string& url,
               const std::string& password, const Layout& layout, const std::string& log_path);

  pid_t pid() const { return pid_; }
  bool Exited(int* status);

  // SIGTERM (the master releases its lease), SIGKILL after 5 s.
  void Stop();

  std::string LogTail(size_t bytes = 3000) const;

 private:
  pid_t pid_ = -1;
  std::string log_path_;
};

// The Unix ms of the first log line containing `needle` ("2026-01-02T03:04:05.678Z ..."), or -1.
int64_t LogLineMs(const std::string& path, std::string_view needle);

}  // namespace ft::bench
