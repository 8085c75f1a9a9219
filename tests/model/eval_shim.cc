#include "tests/model/eval_shim.h"

namespace ft::model {

Status EvalShim::Run(const redis::Argv& argv, redis::Reply* out) {
  if (argv.empty() || argv[0] != "EVAL") return store_->Run(argv, out);
  // EVAL script numkeys keys... args...
  if (argv.size() == 8 && argv[2] == "2") {  // set: HSET hash rank value; ZADD steps step step
    const std::string &hash = argv[3], &steps = argv[4], &rank = argv[5], &value = argv[6], &step = argv[7];
    redis::Reply r;
    if (Status s = store_->Run({"HSET", hash, rank, value}, &r); !s.ok()) return s;
    if (Status s = store_->Run({"ZADD", steps, step, step}, &r); !s.ok()) return s;
    *out = redis::Reply::Integer(1);
    return Status::Ok();
  }
  if (argv.size() == 8 && argv[2] == "3" && argv[1].find("cjson") == std::string::npos) {
    // remove: HDEL hash rank; ZREM steps step once neither hash of the step holds anything
    const std::string &hash = argv[3], &steps = argv[4], &other = argv[5], &rank = argv[6], &step = argv[7];
    redis::Reply r, own, buddy;
    if (Status s = store_->Run({"HDEL", hash, rank}, &r); !s.ok()) return s;
    if (Status s = store_->Run({"HLEN", hash}, &own); !s.ok()) return s;
    if (Status s = store_->Run({"HLEN", other}, &buddy); !s.ok()) return s;
    if (own.integer() == 0 && buddy.integer() == 0) {
      if (Status s = store_->Run({"ZREM", steps, step}, &r); !s.ok()) return s;
    }
    *out = redis::Reply::Integer(1);
    return Status::Ok();
  }
  return Status::Unsupported("the model's EVAL shim knows only the Reporter's copy scripts");
}

Status EvalShim::PipelinePartial(const std::vector<redis::Argv>& commands, std::vector<redis::Reply>* received) {
  received->clear();
  for (const redis::Argv& argv : commands) {
    redis::Reply r;
    Status s = Run(argv, &r);
    if (!s.ok()) {
      if (!store_->connected()) return s;  // the connection broke: the rest is not sent
      r = redis::Reply::Error(std::string(s.message()));
    }
    received->push_back(std::move(r));
  }
  return Status::Ok();
}

}  // namespace ft::model
