// Every collective x several types x every operator against reference values, for 2, 3, 4 and
// 8 member processes, out-of-place and in-place, with data larger than one chunk. Cases are
// issued in batches back to back on one stream and checked after one synchronization, which
// also proves that consecutive collectives on a communicator match in order.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "harness.h"
#include "reference.h"

namespace gpusim_test {
namespace {

enum class Coll { kAllReduce, kReduce, kBroadcast, kBcast, kAllGather, kReduceScatter, kAlltoAll, kGather, kScatter };

const char* CollStr(Coll c) {
  switch (c) {
    case Coll::kAllReduce: return "AllReduce";
    case Coll::kReduce: return "Reduce";
    case Coll::kBroadcast: return "Broadcast";
    case Coll::kBcast: return "Bcast";
    case Coll::kAllGather: return "AllGather";
    case Coll::kReduceScatter: return "ReduceScatter";
    case Coll::kAlltoAll: return "AlltoAll";
    case Coll::kGather: return "Gather";
    case Coll::kScatter: return "Scatter";
  }
  return "?";
}

struct Case {
  Coll coll;
  ncclDataType_t type;
  ncclRedOp_t op;
  size_t count;
  bool inplace;
  int root;
};

std::string Describe(const Case& c) {
  return std::string(CollStr(c.coll)) + "/" + TypeStr(c.type) + "/" + OpStr(c.op) + " count " +
         std::to_string(c.count) + (c.inplace ? " in-place" : "") + " root " + std::to_string(c.root);
}

// One case's buffers on one rank, issued and later checked.
struct Running {
  Case c;
  std::vector<char> send, recv, want;  // want: expected recv contents (whole buffer)
  const void* sendp = nullptr;
  void* recvp = nullptr;
};

constexpr unsigned char kSentinel = 0xA5;

std::unique_ptr<Running> Issue(const Case& c, int me, int n, ncclComm_t comm, cudaStream_t s) {
  auto run = std::make_unique<Running>();
  run->c = c;
  const size_t es = ElemSize(c.type), cnt = c.count, nb = cnt * es;
  const ncclRedOp_t gen = c.op;  // input generator key
  auto& send = run->send;
  auto& recv = run->recv;
  auto& want = run->want;
  ncclResult_t r = ncclInternalError;
  switch (c.coll) {
    case Coll::kAllReduce:
    case Coll::kReduce: {
      send.resize(nb);
      FillInput(c.type, gen, me, 0, cnt, send.data());
      recv.assign(nb, static_cast<char>(kSentinel));
      const bool gets = c.coll == Coll::kAllReduce || me == c.root;
      want = c.inplace ? send : recv;
      if (gets) ReferenceReduce(c.type, c.op, n, 0, cnt, want.data());
      if (c.inplace) recv = send;
      run->sendp = c.inplace ? recv.data() : send.data();
      run->recvp = recv.data();
      r = c.coll == Coll::kAllReduce
              ? ncclAllReduce(run->sendp, run->recvp, cnt, c.type, c.op, comm, s)
              : ncclReduce(run->sendp, run->recvp, cnt, c.type, c.op, c.root, comm, s);
      break;
    }
    case Coll::kBroadcast:
    case Coll::kBcast: {
      send.resize(nb);
      FillInput(c.type, gen, me, 0, cnt, send.data());
      recv.assign(nb, static_cast<char>(kSentinel));
      want.resize(nb);
      FillInput(c.type, gen, c.root, 0, cnt, want.data());
      if (c.coll == Coll::kBcast || c.inplace) {
        if (me == c.root) recv = send;
        run->sendp = recv.data();
      } else {
        run->sendp = send.data();
      }
      run->recvp = recv.data();
      r = c.coll == Coll::kBcast ? ncclBcast(run->recvp, cnt, c.type, c.root, comm, s)
                                 : ncclBroadcast(run->sendp, run->recvp, cnt, c.type, c.root, comm, s);
      break;
    }
    case Coll::kAllGather:
    case Coll::kGather: {
      send.resize(nb);
      FillInput(c.type, gen, me, 0, cnt, send.data());
      const bool gets = c.coll == Coll::kAllGather || me == c.root;
      recv.assign(nb * n, static_cast<char>(kSentinel));
      want = recv;
      if (gets) {
        for (int k = 0; k < n; ++k) FillInput(c.type, gen, k, 0, cnt, want.data() + k * nb);
      }
      run->sendp = send.data();
      if (c.inplace && gets) {
        std::memcpy(recv.data() + me * nb, send.data(), nb);
        run->sendp = recv.data() + me * nb;
      }
      run->recvp = recv.data();
      r = c.coll == Coll::kAllGather
              ? ncclAllGather(run->sendp, run->recvp, cnt, c.type, comm, s)
              : ncclGather(run->sendp, run->recvp, cnt, c.type, c.root, comm, s);
      break;
    }
    case Coll::kReduceScatter: {
      send.resize(nb * n);
      FillInput(c.type, gen, me, 0, cnt * n, send.data());
      recv.assign(nb, static_cast<char>(kSentinel));
      want.resize(nb);
      ReferenceReduce(c.type, c.op, n, me * cnt, cnt, want.data());
      run->sendp = send.data();
      run->recvp = c.inplace ? send.data() + me * nb : recv.data();
      r = ncclReduceScatter(run->sendp, run->recvp, cnt, c.type, c.op, comm, s);
      break;
    }
    case Coll::kAlltoAll: {
      send.resize(nb * n);
      FillInput(c.type, gen, me, 0, cnt * n, send.data());
      recv.assign(nb * n, static_cast<char>(kSentinel));
      want.resize(nb * n);
      for (int k = 0; k < n; ++k) FillInput(c.type, gen, k, me * cnt, cnt, want.data() + k * nb);
      run->sendp = send.data();
      run->recvp = recv.data();
      r = ncclAlltoAll(run->sendp, run->recvp, cnt, c.type, comm, s);
      break;
    }
    case Coll::kScatter: {
      send.resize(nb * n);
      FillInput(c.type, gen, me, 0, cnt * n, send.data());
      recv.assign(nb, static_cast<char>(kSentinel));
      want.resize(nb);
      FillInput(c.type, gen, c.root, me * cnt, cnt, want.data());
      run->sendp = send.data();
      run->recvp = (c.inplace && me == c.root) ? send.data() + me * nb : recv.data();
      r = ncclScatter(run->sendp, run->recvp, cnt, c.type, c.root, comm, s);
      break;
    }
  }
  CHILD_CHECK(r == ncclSuccess, "%s: returned %d: %s", Describe(c).c_str(), static_cast<int>(r),
              ncclGetLastError(comm));
  return run;
}

void Check(const Running& run) {
  const Case& c = run.c;
  const size_t es = ElemSize(c.type);
  // In-place ReduceScatter/Scatter write a window of the send buffer; all else the recv buffer.
  const char* got = static_cast<const char*>(run.recvp);
  const size_t bytes = got == run.recv.data() ? run.recv.size() : c.count * es;
  CHILD_CHECK(bytes == run.want.size(), "%s: size %zu vs %zu", Describe(c).c_str(), bytes,
              run.want.size());
  std::string why;
  CHILD_CHECK(SameElements(c.type, got, run.want.data(), bytes / es, &why), "%s: %s",
              Describe(c).c_str(), why.c_str());
}

std::vector<Case> Matrix(int n) {
  const ncclDataType_t all_types[] = {ncclInt8,    ncclUint8,   ncclInt32,   ncclUint32,
                                      ncclInt64,   ncclUint64,  ncclFloat16, ncclFloat32,
                                      ncclFloat64, ncclBfloat16};
  const ncclRedOp_t ops[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};
  std::vector<Case> v;
  int k = 0;
  for (ncclDataType_t t : all_types) {
    for (ncclRedOp_t op : ops) v.push_back({Coll::kAllReduce, t, op, 3001, false, 0});
  }
  v.push_back({Coll::kAllReduce, ncclFloat32, ncclSum, 3001, true, 0});
  v.push_back({Coll::kAllReduce, ncclFloat16, ncclAvg, 3001, true, 0});
  v.push_back({Coll::kAllReduce, ncclInt8, ncclProd, 1, true, 0});
  for (ncclDataType_t t : {ncclInt8, ncclUint32, ncclFloat16, ncclBfloat16, ncclFloat64}) {
    for (ncclRedOp_t op : ops) v.push_back({Coll::kReduce, t, op, 3001, (k % 3) == 0, k++ % n});
  }
  for (ncclDataType_t t : {ncclUint8, ncclInt64, ncclFloat16, ncclBfloat16, ncclFloat32}) {
    for (ncclRedOp_t op : ops) v.push_back({Coll::kReduceScatter, t, op, 1001, (k++ % 2) == 0, 0});
  }
  for (Coll c : {Coll::kBroadcast, Coll::kBcast, Coll::kAllGather, Coll::kAlltoAll, Coll::kGather,
                 Coll::kScatter}) {
    for (ncclDataType_t t : {ncclInt8, ncclFloat16, ncclFloat64, ncclUint64}) {
      for (bool inplace : {false, true}) {
        if (c == Coll::kAlltoAll && inplace) continue;  // not an NCCL in-place form
        v.push_back({c, t, ncclSum, 2001, inplace, k++ % n});
      }
    }
  }
  v.push_back({Coll::kAlltoAll, ncclFloat32, ncclSum, 1, false, 0});
  v.push_back({Coll::kAllGather, ncclUint8, ncclSum, 1, false, 0});
  return v;
}

void RunMatrix(int n) {
  ncclUniqueId id = NewId();
  // 16 KiB slots: the cases need several rounds each (up to ~20 for ReduceScatter at n=8).
  setenv("GPUSIM_NCCL_CHUNK_BYTES", "16K", 1);
  auto out = RunRanks(n, 60, [&](int me) {
    ncclComm_t comm;
    CHILD_NCCL(ncclCommInitRank(&comm, n, id, me));
    cudaStream_t s;
    CHILD_CUDA(cudaStreamCreate(&s));
    std::vector<Case> cases = Matrix(n);
    constexpr size_t kBatch = 24;
    for (size_t b = 0; b < cases.size(); b += kBatch) {
      std::vector<std::unique_ptr<Running>> batch;
      for (size_t i = b; i < std::min(cases.size(), b + kBatch); ++i) {
        batch.push_back(Issue(cases[i], me, n, comm, s));
      }
      CHILD_CUDA(cudaStreamSynchronize(s));
      for (auto& run : batch) Check(*run);
    }
    ncclResult_t async;
    CHILD_NCCL(ncclCommGetAsyncError(comm, &async));
    CHILD_CHECK(async == ncclSuccess);
    CHILD_NCCL(ncclCommDestroy(comm));
    CHILD_CUDA(cudaStreamDestroy(s));
  });
  ExpectAllOk(out);
}

class Collectives : public NcclTest {};

TEST_F(Collectives, TwoRanks) { RunMatrix(2); }
TEST_F(Collectives, ThreeRanks) { RunMatrix(3); }
TEST_F(Collectives, FourRanks) { RunMatrix(4); }
TEST_F(Collectives, EightRanks) { RunMatrix(8); }

// Default 1 MiB chunks with tensors of several chunks (3 MiB per rank).
TEST_F(Collectives, LargerThanOneDefaultChunk) {
  const int n = 4;
  ncclUniqueId id = NewId();
  auto out = RunRanks(n, 60, [&](int me) {
    ncclComm_t comm;
    CHILD_NCCL(ncclCommInitRank(&comm, n, id, me));
    cudaStream_t s;
    CHILD_CUDA(cudaStreamCreate(&s));
    std::vector<Case> cases = {
        {Coll::kAllReduce, ncclFloat32, ncclSum, (3u << 20) / 4 + 5, false, 0},
        {Coll::kAllReduce, ncclBfloat16, ncclMax, (3u << 20) / 2, true, 0},
        {Coll::kAllGather, ncclUint8, ncclSum, (1u << 20) + 3, true, 0},
        {Coll::kReduceScatter, ncclFloat64, ncclSum, (1u << 20) / 8 + 1, false, 0},
        {Coll::kBroadcast, ncclInt32, ncclSum, (3u << 20) / 4, false, 3},
    };
    std::vector<std::unique_ptr<Running>> runs;
    for (const Case& c : cases) runs.push_back(Issue(c, me, n, comm, s));
    CHILD_CUDA(cudaStreamSynchronize(s));
    for (auto& run : runs) Check(*run);
    CHILD_NCCL(ncclCommDestroy(comm));
  });
  ExpectAllOk(out);
}

}  // namespace
}  // namespace gpusim_test
