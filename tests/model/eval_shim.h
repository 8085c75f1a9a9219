// redis::FakeRedis speaks no Lua. ftworker's Reporter writes a checkpoint copy with two small
// scripts (ftworker/reporter.cc: kSetCopyScript, kRemoveCopyScript); this connection runs each
// as the plain commands it is made of, on the fake server, in one step (nothing else runs on
// the fake in between: as atomic as the script). Every other command passes through.
#ifndef FT_TESTS_MODEL_EVAL_SHIM_H_
#define FT_TESTS_MODEL_EVAL_SHIM_H_

#include <string>
#include <vector>

#include "redis/fake/fake_store.h"

namespace ft::model {

class EvalShim : public redis::Commands {
 public:
  explicit EvalShim(redis::FakeStore* store) : store_(store) {}

  bool connected() const override { return store_->connected(); }
  Status Run(const redis::Argv& argv, redis::Reply* out) override;
  Status PipelinePartial(const std::vector<redis::Argv>& commands, std::vector<redis::Reply>* received) override;
  std::string Where() const override { return store_->Where(); }

 private:
  redis::FakeStore* store_;
};

}  // namespace ft::model

#endif  // FT_TESTS_MODEL_EVAL_SHIM_H_
