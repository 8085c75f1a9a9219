#include "ftmaster/core/topology.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <map>
#include <set>
#include <unordered_map>

#include "common/names.h"

namespace ft::master {
namespace {

constexpr std::array<Dim, kDims> kDefaultOrder = {Dim::kTp, Dim::kDp, Dim::kPp};

std::string Trim(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (!std::isspace(static_cast<unsigned char>(c))) {
      out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    }
  }
  return out;
}

bool DimFromName(std::string_view name, Dim* out) {
  if (name == "tp") *out = Dim::kTp;
  else if (name == "dp") *out = Dim::kDp;
  else if (name == "pp") *out = Dim::kPp;
  else return false;
  return true;
}

Status ParseOrder(std::string_view text, std::array<Dim, kDims>* out) {
  std::string order = Trim(text);
  if (order.empty()) {
    *out = kDefaultOrder;
    return Status::Ok();
  }
  std::array<Dim, kDims> dims{};
  std::array<bool, kDims> seen = {false, false, false};
  size_t count = 0;
  size_t start = 0;
  while (start <= order.size()) {
    size_t end = order.find('-', start);
    if (end == std::string::npos) end = order.size();
    std::string_view name(order.data() + start, end - start);
    Dim dim;
    if (!DimFromName(name, &dim)) {
      return Status::InvalidArgument(fmt::format(
          "rank order \"{}\": \"{}\" is not tp, dp or pp; write e.g. \"tp-dp-pp\"", text, name));
    }
    if (seen[static_cast<int>(dim)] || count == kDims) {
      return Status::InvalidArgument(fmt::format(
          "rank order \"{}\" names {} twice; name each of tp, dp, pp once", text, name));
    }
    seen[static_cast<int>(dim)] = true;
    dims[count++] = dim;
    start = end + 1;
  }
  if (count != kDims) {
    return Status::InvalidArgument(fmt::format(
        "rank order \"{}\" must name all of tp, dp and pp, e.g. \"tp-dp-pp\"", text));
  }
  *out = dims;
  return Status::Ok();
}

std::string OrderText(const std::array<Dim, kDims>& order) {
  return fmt::format("{}-{}-{}", DimName(order[0]), DimName(order[1]), DimName(order[2]));
}

constexpr Named<Dim> kDimNames[] = {
    {Dim::kTp, "tp"}, {Dim::kDp, "dp"}, {Dim::kPp, "pp"}};
static_assert(NamesAreUnique(kDimNames));
}  // namespace

const char* DimName(Dim dim) { return NameIn(kDimNames, dim); }

Status Topology::FromSizes(int tp, int dp, int pp, std::string_view order, Topology* out) {
  std::array<Dim, kDims> dims;
  FT_RETURN_IF_ERROR(ParseOrder(order, &dims));
  if (tp < 1 || dp < 1 || pp < 1) {
    return Status::InvalidArgument(
        fmt::format("topology tp={} dp={} pp={}: every size must be at least 1", tp, dp, pp));
  }
  int64_t world = int64_t{tp} * dp * pp;
  if (world > (int64_t{1} << 30)) {
    return Status::InvalidArgument(fmt::format("topology tp={} dp={} pp={} is too large", tp, dp, pp));
  }
  Topology t;
  t.known_ = true;
  t.inferred_ = false;
  t.world_size_ = static_cast<int>(world);
  t.size_ = {tp, dp, pp};
  t.order_ = dims;
  int stride = 1;
  for (Dim d : dims) {
    t.stride_[static_cast<int>(d)] = stride;
    stride *= t.size_[static_cast<int>(d)];
  }
  t.note_.clear();
  *out = std::move(t);
  return Status::Ok();
}

Status Topology::Parse(std::string_view sizes, std::string_view order, int world_size,
                       Topology* out) {
  std::string text = Trim(sizes);
  if (text.empty()) {
    return Status::InvalidArgument("topology is empty; write e.g. \"dp=2,tp=4,pp=2\"");
  }
  std::array<int, kDims> size = {1, 1, 1};
  std::array<bool, kDims> seen = {false, false, false};
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    std::string_view part(text.data() + start, end - start);
    size_t eq = part.find('=');
    Dim dim;
    if (eq == std::string_view::npos || !DimFromName(part.substr(0, eq), &dim)) {
      return Status::InvalidArgument(fmt::format(
          "topology \"{}\": \"{}\" is not tp=N, dp=N or pp=N; write e.g. \"dp=2,tp=4,pp=2\"",
          sizes, part));
    }
    std::string_view value = part.substr(eq + 1);
    int n = 0;
    auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (ec != std::errc() || ptr != value.data() + value.size() || n < 1) {
      return Status::InvalidArgument(fmt::format(
          "topology \"{}\": {} must be a positive integer, got \"{}\"", sizes, DimName(dim), value));
    }
    if (seen[static_cast<int>(dim)]) {
      return Status::InvalidArgument(
          fmt::format("topology \"{}\" sets {} twice", sizes, DimName(dim)));
    }
    seen[static_cast<int>(dim)] = true;
    size[static_cast<int>(dim)] = n;
    start = end + 1;
  }
  Topology t;
  FT_RETURN_IF_ERROR(FromSizes(size[0], size[1], size[2], order, &t));
  if (world_size > 0 && t.world_size_ != world_size) {
    return Status::InvalidArgument(fmt::format(
        "topology \"{}\" has tp*dp*pp = {} ranks but the job has {}; fix the sizes", sizes,
        t.world_size_, world_size));
  }
  *out = std::move(t);
  return Status::Ok();
}

Topology Topology::Unknown(std::string reason) {
  Topology t;
  t.note_ = std::move(reason);
  return t;
}

std::string Topology::order() const { return OrderText(order_); }

std::string Topology::sizes() const { return fmt::format("tp={},dp={},pp={}", tp(), dp(), pp()); }

Topology Topology::Kept(const Topology& t, std::string why) {
  Topology k = t;
  k.inferred_ = true;
  k.kept_ = true;
  k.note_ = std::move(why);
  return k;
}

Topology Topology::InferOrKeep(std::span<const proto::Membership> membership, const Topology* last) {
  Topology now = Infer(membership);
  if (now.known() || last == nullptr || !last->known()) return now;
  size_t gone = 0;
  for (const proto::Membership& m : membership) {
    if (proto::ProcessGone(m.state)) ++gone;
  }
  if (gone == 0) return now;
  // (What remains says nothing: the departed ranks' communicators are gone.)
  return Kept(*last, fmt::format("kept from while the ranks ran: {} of {} ranks have left",
                                 gone, membership.size()));
}

Coord Topology::CoordOf(int rank) const {
  Coord c;
  c.tp = (rank / stride_[0]) % size_[0];
  c.dp = (rank / stride_[1]) % size_[1];
  c.pp = (rank / stride_[2]) % size_[2];
  return c;
}

int Topology::RankOf(Coord c) const {
  return c.tp * stride_[0] + c.dp * stride_[1] + c.pp * stride_[2];
}

std::vector<int> Topology::ShardRanks(int tp, int pp) const {
  std::vector<int> ranks;
  ranks.reserve(static_cast<size_t>(dp()));
  for (int d = 0; d < dp(); ++d) ranks.push_back(RankOf(Coord{tp, d, pp}));
  return ranks;
}

std::string Topology::Describe() const {
  if (!known_) return "unknown: " + note_;
  std::string text = fmt::format("{}: tp={} dp={} pp={}, order {}, {} ranks",
                                 inferred_ ? "inferred from communicators" : "explicit", tp(),
                                 dp(), pp(), order(), world_size_);
  if (!note_.empty()) text += " (" + note_ + ")";
  return text;
}

// ---- inference ---------------------------------------------------------------------------

namespace {

// The ranks' newest membership entries by rank; a reason when they are not exactly 0..W-1.
std::string RanksOf(std::span<const proto::Membership> membership,
                    std::unordered_map<int, const proto::Membership*>* by_rank) {
  int declared = -1;
  for (const proto::Membership& m : membership) {
    if (m.rank < 0) continue;
    auto [it, inserted] = by_rank->emplace(m.rank, &m);
    if (!inserted && m.incarnation > it->second->incarnation) it->second = &m;
    declared = std::max(declared, m.world_size);
  }
  const int world = static_cast<int>(by_rank->size());
  if (world == 0) return "no membership reported yet";
  if (declared > 0 && declared != world) return fmt::format("membership from {} of {} ranks so far", world, declared);
  for (const auto& [rank, m] : *by_rank) {
    if (rank >= world) return fmt::format("ranks are not 0..{}: rank {} reported", world - 1, rank);
  }
  return {};
}

// The distinct member sets of the communicators (a comm used for collectives and p2p, or two
// comms over the same ranks, count once), each with whether it carries p2p traffic; groups
// with a gap or a contradiction are counted in *incomplete.
std::map<std::vector<int>, bool> MemberSets(const std::unordered_map<int, const proto::Membership*>& by_rank,
                                            int* incomplete) {
  const int world = static_cast<int>(by_rank.size());
  // Groups by communicator id, members in comm-rank order.
  struct Group {
    int size = 0;
    bool p2p = false;
    bool bad = false;
    std::vector<int> members;
  };
  std::unordered_map<uint64_t, Group> groups;
  for (const auto& [rank, m] : by_rank) {
    for (const proto::CommMember& c : m->comms) {
      if (c.comm_size < 2) continue;
      Group& g = groups[c.comm_id];
      if (g.size == 0) {
        g.size = c.comm_size;
        g.members.assign(static_cast<size_t>(std::min(c.comm_size, world + 1)), -1);
      }
      g.p2p = g.p2p || c.p2p;
      if (c.comm_size != g.size || c.comm_rank < 0 || c.comm_rank >= static_cast<int>(g.members.size())) {
        g.bad = true;
        continue;
      }
      int& slot = g.members[static_cast<size_t>(c.comm_rank)];
      if (slot != -1 && slot != rank) g.bad = true;
      slot = rank;
    }
  }
  std::map<std::vector<int>, bool> sets;
  for (auto& [id, g] : groups) {
    if (g.bad || g.size > world ||
        std::find(g.members.begin(), g.members.end(), -1) != g.members.end()) {
      ++*incomplete;
      continue;
    }
    std::vector<int> sorted = g.members;
    std::sort(sorted.begin(), sorted.end());
    bool& p2p = sets[std::move(sorted)];
    p2p = p2p || g.p2p;
  }
  return sets;
}

struct Family {
  int stride = 0;
  int n = 0;
  bool p2p = false;
  std::vector<const std::vector<int>*> groups;
};

// Families: arithmetic groups of one (stride, size); the others counted in *irregular, the
// strides carrying p2p traffic in *p2p_strides.
std::map<std::pair<int, int>, Family> FamiliesOf(const std::map<std::vector<int>, bool>& sets,
                                                 std::set<int>* p2p_strides, int* irregular) {
  std::map<std::pair<int, int>, Family> families;
  for (const auto& [members, p2p] : sets) {
    const int n = static_cast<int>(members.size());
    const int stride = members[1] - members[0];
    bool arithmetic = stride > 0;
    for (int i = 2; arithmetic && i < n; ++i) arithmetic = members[i] - members[i - 1] == stride;
    if (!arithmetic) {
      ++*irregular;
      continue;
    }
    if (p2p) p2p_strides->insert(stride);
    Family& f = families[{stride, n}];
    f.stride = stride;
    f.n = n;
    f.p2p = f.p2p || p2p;
    f.groups.push_back(&members);
  }
  return families;
}

// The finest chain of families that partition the world: strides 1, n1, n1*n2, ... with the
// product of sizes = world. A family spanning the whole world is only used when nothing finer
// exists.
std::vector<const Family*> FinestGrid(const std::map<std::pair<int, int>, Family>& families, int world) {
  std::vector<const Family*> partitions;
  std::vector<char> seen(static_cast<size_t>(world));
  for (const auto& [key, f] : families) {
    if (static_cast<int64_t>(f.groups.size()) * f.n != world) continue;
    std::fill(seen.begin(), seen.end(), 0);
    bool ok = true;
    for (const std::vector<int>* g : f.groups) {
      for (int r : *g) {
        if (seen[static_cast<size_t>(r)]) ok = false;
        seen[static_cast<size_t>(r)] = 1;
      }
    }
    if (ok) partitions.push_back(&f);
  }
  std::vector<const Family*> best;
  std::vector<const Family*> chain;
  auto search = [&](auto&& self, int product) -> void {
    if (product == world) {
      if (chain.size() > best.size()) best = chain;
      return;
    }
    for (const Family* f : partitions) {
      if (f->stride != product || f->n == world) continue;
      if (static_cast<int64_t>(product) * f->n > world || world % (product * f->n) != 0) continue;
      chain.push_back(f);
      self(self, product * f->n);
      chain.pop_back();
    }
  };
  search(search, 1);
  if (best.empty()) {
    for (const Family* f : partitions) {
      if (f->n == world) best = {f};
    }
  }
  return best;
}

// Names the grid's dimensions, inner first, into *names and the assumptions made into *note;
// a reason when they cannot be told apart.
std::string NameDims(const std::vector<const Family*>& best, const std::set<int>& p2p_strides,
                     std::vector<Dim>* names, std::string* note) {
  const int dims = static_cast<int>(best.size());
  int pp_index = -1;
  int p2p_dims = 0;
  for (int i = 0; i < dims; ++i) {
    if (best[static_cast<size_t>(i)]->p2p || p2p_strides.count(best[static_cast<size_t>(i)]->stride)) {
      pp_index = i;
      ++p2p_dims;
    }
  }
  if (p2p_dims > 1) {
    return "point-to-point traffic on more than one grid dimension; cannot tell which "
           "is pp; pass the topology explicitly";
  }
  if (dims == 3) {
    if (pp_index < 0) {
      pp_index = 2;
      *note = "no p2p traffic seen yet: outermost dimension assumed pp, order tp-dp-pp assumed";
    }
    for (int i = 0, other = 0; i < dims; ++i) {
      if (i == pp_index) names->push_back(Dim::kPp);
      else names->push_back(other++ == 0 ? Dim::kTp : Dim::kDp);
    }
    if (note->empty()) *note = "inner non-pp dimension taken as tp (Megatron convention)";
  } else if (dims == 2) {
    if (pp_index >= 0) {
      return fmt::format(
          "a pipeline of {} stages and one more dimension of {} ranks: cannot tell tp from dp "
          "from communicators alone; pass the topology explicitly",
          best[static_cast<size_t>(pp_index)]->n, best[static_cast<size_t>(1 - pp_index)]->n);
    }
    *names = {Dim::kTp, Dim::kDp};
    *note = "no p2p traffic: pp=1 assumed, inner dimension taken as tp (Megatron convention)";
  } else if (pp_index == 0) {
    *names = {Dim::kPp};
    *note = "one communicator spans all ranks and carries p2p traffic: pure pipeline";
  } else {
    *names = {Dim::kDp};
    *note = "one communicator spans all ranks and nothing finer: taken as pure data parallel "
            "(a pure tensor-parallel job looks the same; pass the topology to be sure)";
  }
  return {};
}

}  // namespace

Topology Topology::Infer(std::span<const proto::Membership> membership) {
  // Ranks: exactly 0..W-1, each once (the newest incarnation wins).
  std::unordered_map<int, const proto::Membership*> by_rank;
  if (std::string why = RanksOf(membership, &by_rank); !why.empty()) return Unknown(std::move(why));
  const int world = static_cast<int>(by_rank.size());
  int incomplete = 0, irregular = 0;
  const std::map<std::vector<int>, bool> sets = MemberSets(by_rank, &incomplete);
  std::set<int> p2p_strides;
  const std::map<std::pair<int, int>, Family> families = FamiliesOf(sets, &p2p_strides, &irregular);
  const std::vector<const Family*> best = FinestGrid(families, world);
  std::string ignored;
  if (irregular > 0 || incomplete > 0) {
    ignored = fmt::format("; ignored {} irregular and {} incomplete communicator groups",
                          irregular, incomplete);
  }
  if (best.empty()) {
    if (world == 1) {
      Topology t;
      (void)FromSizes(1, 1, 1, "", &t);
      t.inferred_ = true;
      t.note_ = "a single rank";
      return t;
    }
    return Unknown(fmt::format(
        "communicators of the {} ranks form no clean tp/dp/pp grid{}; pass the topology "
        "explicitly", world, ignored));
  }
  if (best.size() > static_cast<size_t>(kDims)) {
    return Unknown(fmt::format(
        "communicators form a grid of {} dimensions (context or expert parallelism?); only "
        "tp/dp/pp is understood; pass the topology explicitly", best.size()));
  }
  std::vector<Dim> names;
  std::string note;
  if (std::string why = NameDims(best, p2p_strides, &names, &note); !why.empty()) return Unknown(std::move(why));
  const int dims = static_cast<int>(best.size());
  std::array<int, kDims> size = {1, 1, 1};
  std::array<Dim, kDims> order{};
  std::array<bool, kDims> used = {false, false, false};
  for (int i = 0; i < dims; ++i) {
    size[static_cast<int>(names[static_cast<size_t>(i)])] = best[static_cast<size_t>(i)]->n;
    order[static_cast<size_t>(i)] = names[static_cast<size_t>(i)];
    used[static_cast<int>(names[static_cast<size_t>(i)])] = true;
  }
  int next = dims;
  for (Dim d : kDefaultOrder) {
    if (!used[static_cast<int>(d)]) order[static_cast<size_t>(next++)] = d;
  }
  Topology t;
  Status status = FromSizes(size[0], size[1], size[2], OrderText(order), &t);
  if (!status.ok()) return Unknown(std::string(status.message()));
  t.inferred_ = true;
  t.note_ = note + ignored;
  return t;
}

}  // namespace ft::master
