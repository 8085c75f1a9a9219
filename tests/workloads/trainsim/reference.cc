#include "reference.h"


#include "trainsim_math.h"

namespace trainsim {

ReferenceResult RunReference(const Config& c) {
  const int64_t layers = c.layers;
  const int64_t shard = c.shard_len();
  const int64_t full = shard * c.tp;  // one layer's parameters
  const int64_t hidden = c.hidden;
  const int64_t global_batch = int64_t{c.dp} * c.microbatches;

  std::vector<std::vector<float>> w(layers, std::vector<float>(full));
  std::vector<std::vector<float>> grad(layers, std::vector<float>(full));
  // The momentum buffer (--optimizer momentum), whole: sharding it over DP ranks
  // (--sharded-optimizer) changes who computes which element, not the result.
  const bool momentum = c.optimizer == Optimizer::kMomentum;
  std::vector<std::vector<float>> mom(momentum ? layers : 0, std::vector<float>(full, 0.0f));
  std::vector<std::vector<float>> act(layers + 1, std::vector<float>(hidden));
  std::vector<float> part(hidden);
  std::vector<float> g(hidden);

  for (int64_t l = 0; l < layers; ++l) {
    for (int64_t i = 0; i < full; ++i) init_params_at(i, w[l].data(), ParamKey(c.seed, l), 0);
  }
  for (int64_t step = 0; step < c.steps; ++step) {
    for (auto& gr : grad) {
      for (int64_t i = 0; i < full; ++i) fill_at(i, gr.data(), 0.0f);
    }
    for (int64_t mb = 0; mb < global_batch; ++mb) {
      const uint64_t in_key = InputKey(c.seed, step, mb);
      for (int64_t a = 0; a < hidden; ++a) load_batch_at(a, act[0].data(), in_key);
      for (int64_t l = 0; l < layers; ++l) {
        for (int64_t a = 0; a < hidden; ++a) {
          forward_partial_at(a, w[l].data(), act[l].data(), part.data(), 0, full, hidden);
        }
        for (int64_t a = 0; a < hidden; ++a) forward_finish_at(a, part.data(), act[l + 1].data(), l);
      }
      const uint64_t target_key = TargetKey(c.seed, step, mb);
      for (int64_t a = 0; a < hidden; ++a) loss_grad_at(a, act[layers].data(), g.data(), target_key);
      for (int64_t l = layers - 1; l >= 0; --l) {
        for (int64_t i = 0; i < full; ++i) {
          backward_params_at(i, act[l].data(), g.data(), grad[l].data(), 0, hidden);
        }
        for (int64_t a = 0; a < hidden; ++a) {
          backward_input_at(a, w[l].data(), g.data(), part.data(), 0, full, hidden);
        }
        for (int64_t a = 0; a < hidden; ++a) backward_finish_at(a, part.data(), g.data(), l);
      }
    }
    const float factor = AverageFactor(global_batch);
    for (int64_t l = 0; l < layers; ++l) {
      for (int64_t i = 0; i < full; ++i) scale_at(i, grad[l].data(), factor);
      if (momentum) {
        for (int64_t i = 0; i < full; ++i) {
          momentum_step_at(i, w[l].data(), mom[l].data(), grad[l].data(), kLearningRate);
        }
      } else {
        for (int64_t i = 0; i < full; ++i) optimizer_step_at(i, w[l].data(), grad[l].data(), kLearningRate);
      }
    }
  }

  ReferenceResult r;
  r.model_checksum = 0xCBF29CE484222325ull;
  for (const auto& wl : w) r.model_checksum = Fnv1a64(wl.data(), wl.size() * sizeof(float), r.model_checksum);
  r.rank_checksums.resize(c.world());
  const int64_t lps = c.layers_per_stage();
  for (int rank = 0; rank < c.world(); ++rank) {
    const Coord co = CoordOf(c, rank);
    uint64_t h = 0xCBF29CE484222325ull;
    for (int64_t l = co.pp * lps; l < (co.pp + 1) * lps; ++l) {
      h = Fnv1a64(w[l].data() + co.tp * shard, shard * sizeof(float), h);
    }
    r.rank_checksums[rank] = h;
  }
  return r;
}

}  // namespace trainsim
