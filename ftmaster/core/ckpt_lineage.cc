#include "ftmaster/core/ckpt_lineage.h"

namespace ft::master {

int64_t SavedUnixMs(const proto::CkptCopy& copy) {
  return copy.saved_unix_ms > 0 ? copy.saved_unix_ms : copy.unix_ms;
}

const proto::CkptRewind* SupersededBy(const proto::CkptCopy& copy, std::span<const proto::CkptRewind> rewinds) {
  const int64_t saved = SavedUnixMs(copy);
  for (const proto::CkptRewind& w : rewinds) {
    if (copy.step > w.step && saved < w.unix_ms) return &w;
  }
  return nullptr;
}

bool AddRewind(std::vector<proto::CkptRewind>* rewinds, proto::CkptRewind rewind) {
  for (const proto::CkptRewind& w : *rewinds) {
    if (w.step <= rewind.step && w.unix_ms >= rewind.unix_ms) return false;
  }
  rewinds->push_back(std::move(rewind));
  if (rewinds->size() > proto::kMaxCkptRewinds) {
    rewinds->erase(rewinds->begin(), rewinds->begin() + static_cast<ptrdiff_t>(rewinds->size() - proto::kMaxCkptRewinds));
  }
  return true;
}

}  // namespace ft::master
