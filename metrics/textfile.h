// Writing the metrics for node_exporter's textfile collector: the collector reads every *.prom
// file of its directory at each scrape, so a file must never be seen half written. The text goes
// to a temporary file in the same directory (a name not ending in .prom), is fsynced, and is
// renamed over the target (atomic within one file system); the directory is fsynced after.
#ifndef FT_METRICS_TEXTFILE_H_
#define FT_METRICS_TEXTFILE_H_

#include <string>
#include <string_view>

#include "common/status.h"

namespace ft::metrics {

// Replaces `path` with `text` atomically (mode 0644: node_exporter usually runs as another
// user). On failure `path` is unchanged and the temporary file is removed.
Status WriteTextfile(const std::string& path, std::string_view text);

}  // namespace ft::metrics

#endif  // FT_METRICS_TEXTFILE_H_
