#include "redis/spread.h"

namespace ft::redis {

Status HGetAllOf(Commands& db, const std::vector<std::string>& keys, Reply* merged) {
  std::vector<Argv> commands;
  commands.reserve(keys.size());
  for (const std::string& key : keys) commands.push_back({"HGETALL", key});
  std::vector<Reply> replies;
  FT_RETURN_IF_ERROR(db.PipelinePartial(commands, &replies));
  if (replies.size() != keys.size()) {
    return Status::Unavailable("Redis at " + db.Where() + " answered " +
                               std::to_string(replies.size()) + " of " +
                               std::to_string(keys.size()) + " HGETALLs");
  }
  std::vector<Reply> pairs;
  for (size_t i = 0; i < replies.size(); ++i) {
    const Reply& r = replies[i];
    if (r.is_error()) return ServerErrorStatus(db.Where(), "HGETALL", r.str());
    if (!r.is_array()) {
      // Not a hash: handed on as the reply it is, for the caller's bad-value report.
      if (keys.size() == 1) {
        *merged = r;
        return Status::Ok();
      }
      continue;
    }
    pairs.insert(pairs.end(), r.elements().begin(), r.elements().end());
  }
  *merged = Reply::Array(std::move(pairs));
  return Status::Ok();
}

}  // namespace ft::redis
