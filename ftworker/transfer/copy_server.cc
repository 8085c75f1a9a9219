#include "ftworker/transfer/copy_server.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "common/mutex.h"
#include "ftworker/transfer/region_name.h"
#include "jitckpt/manifest.h"

namespace ft::worker {

namespace {

// A committed arena copy: the bytes of one generation of a kept mapping.
class ArenaRegion : public rdma::Region {
 public:
  ArenaRegion(std::shared_ptr<const void> keep, const ckpt::Arena* arena, uint64_t generation,
              uint64_t bytes, std::string meta)
      : keep_(std::move(keep)), arena_(arena), generation_(generation), bytes_(bytes),
        meta_(std::move(meta)) {}
  const uint8_t* data() const override { return arena_->data(generation_); }
  uint64_t size() const override { return bytes_; }
  std::string_view meta() const override { return meta_; }
  bool StillValid() const override { return arena_->StillCommitted(generation_); }

 private:
  std::shared_ptr<const void> keep_;  // the mapping
  const ckpt::Arena* arena_;
  uint64_t generation_;
  uint64_t bytes_;
  std::string meta_;
};

// A local-tier data file, mapped read-only for the region's lifetime. A fast path registers the
// mapping at its first offer: `unmapped` (the provider's hook, VerbsServer::Forget) is told
// before the pages go, or the registration would pin them for good and a later mapping at the
// same address would be served from it.
class FileRegion : public rdma::Region {
 public:
  FileRegion(uint8_t* base, uint64_t mapped, uint64_t bytes, std::string meta,
             std::function<void(const uint8_t*, uint64_t)> unmapped)
      : base_(base), mapped_(mapped), bytes_(bytes), meta_(std::move(meta)), unmapped_(std::move(unmapped)) {}
  ~FileRegion() override {
    if (base_ == nullptr) return;
    if (unmapped_) unmapped_(base_, mapped_);
    munmap(base_, mapped_);
  }
  const uint8_t* data() const override { return base_; }
  uint64_t size() const override { return bytes_; }
  std::string_view meta() const override { return meta_; }
  bool StillValid() const override { return true; }  // renamed into place, never rewritten

 private:
  uint8_t* base_;
  uint64_t mapped_;
  uint64_t bytes_;
  std::string meta_;
  std::function<void(const uint8_t*, uint64_t)> unmapped_;
};

Status NotHeld(ckpt::CopyId id, CopyPlace place, std::string_view why) {
  return Status::NotFound(fmt::format("this node holds no servable {} copy of step {} rank {}: {}",
                                      CopyPlaceName(place), id.step, id.rank, why));
}

}  // namespace

CopyProvider::CopyProvider(CopyProviderOptions options) : options_(std::move(options)) {}

Status CopyProvider::Open(std::string_view name, std::shared_ptr<const rdma::Region>* out) {
  RegionName parsed;
  FT_RETURN_IF_ERROR(ParseRegionName(name, &parsed));
  const ckpt::CopyId id{parsed.step, parsed.rank};
  return parsed.place == CopyPlace::kLocal ? OpenLocal(id, out) : OpenArena(id, parsed.place, out);
}

void CopyProvider::Prune() {
  MutexLock lock(&mu_);
  for (auto it = mappings_.begin(); it != mappings_.end();) {
    struct stat st {};
    const bool same = stat(it->first.c_str(), &st) == 0 && st.st_dev == it->second->dev && st.st_ino == it->second->ino;
    it = same ? std::next(it) : mappings_.erase(it);
  }
}

void CopyProvider::Warm() {
  if (!options_.arena_paths) return;
  for (const std::string& path : options_.arena_paths()) {
    std::shared_ptr<const Mapping> mapping;
    (void)MappingOf(path, &mapping);  // an unreadable arena is the keeper's to report
  }
}

size_t CopyProvider::mapped_arenas() {
  MutexLock lock(&mu_);
  return mappings_.size();
}

Status CopyProvider::MappingOf(const std::string& path, std::shared_ptr<const Mapping>* out) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    MutexLock lock(&mu_);
    mappings_.erase(path);
    return Status::FromErrno(errno, fmt::format("host arena {}", path));
  }
  {
    MutexLock lock(&mu_);
    auto it = mappings_.find(path);
    if (it != mappings_.end() && it->second->dev == st.st_dev && it->second->ino == st.st_ino) {
      *out = it->second;
      return Status::Ok();
    }
  }
  auto mapping = std::make_shared<Mapping>();
  FT_RETURN_IF_ERROR(ckpt::Arena::OpenForRead(path, &mapping->arena));
  // The identity of the file actually mapped (it may have been replaced again since stat).
  if (stat(path.c_str(), &st) == 0) {
    mapping->dev = st.st_dev;
    mapping->ino = st.st_ino;
  }
  if (options_.mapped) options_.mapped(mapping->arena.slots_data(), mapping->arena.slots_bytes());
  mapping->unmapped = options_.unmapped;
  MutexLock lock(&mu_);
  mappings_[path] = mapping;
  *out = std::move(mapping);
  return Status::Ok();
}

Status CopyProvider::OpenArena(ckpt::CopyId id, CopyPlace place, std::shared_ptr<const rdma::Region>* out) {
  const auto& path_of = place == CopyPlace::kReplica ? options_.replica_path_of : options_.arena_path_of;
  const std::string path = path_of ? path_of(id) : std::string();
  if (path.empty()) {
    return NotHeld(id, place, place == CopyPlace::kReplica ? "this node holds no buddy copy of that rank"
                                                           : "no arena of this node's ranks holds it");
  }
  std::shared_ptr<const Mapping> mapping;
  Status s = MappingOf(path, &mapping);
  if (!s.ok()) return NotHeld(id, place, s.message());
  ckpt::Manifest m;
  uint64_t generation = 0;
  // Either slot: the plan may restore the step before the newest one saved.
  s = mapping->arena.ReadStep(id.step, &m, &generation);
  if (!s.ok()) s = mapping->arena.ReadCommitted(&m, &generation);  // what it holds instead, for the reason
  if (!s.ok()) return NotHeld(id, place, s.message());
  if (m.job != options_.job || m.step != id.step || m.rank != id.rank) {
    return NotHeld(id, place,
                   fmt::format("the arena now holds job '{}' step {} rank {}", m.job, m.step, m.rank));
  }
  if (m.torn) return NotHeld(id, place, "the copy is torn (saved during an optimizer update)");
  if (m.data_bytes > mapping->arena.data_capacity()) {
    return NotHeld(id, place, "its manifest claims more bytes than the arena holds");
  }
  std::string meta = ckpt::EncodeManifest(m);
  // The manifest was read after the data it describes was committed; a save that began since
  // would make this copy a mix.
  if (!mapping->arena.StillCommitted(generation)) {
    return NotHeld(id, place, "overwritten by a newer save while being opened");
  }
  const ckpt::Arena* arena = &mapping->arena;
  *out = std::make_shared<ArenaRegion>(std::shared_ptr<const void>(mapping, arena), arena, generation,
                                       m.data_bytes, std::move(meta));
  return Status::Ok();
}

Status CopyProvider::OpenLocal(ckpt::CopyId id, std::shared_ptr<const rdma::Region>* out) {
  if (options_.local_dir.empty()) return NotHeld(id, CopyPlace::kLocal, "this node has no local tier (FT_CKPT_DIR)");
  ckpt::Manifest m;
  Status s = ckpt::ReadManifest(options_.local_dir, options_.job, id, &m);
  if (!s.ok()) return NotHeld(id, CopyPlace::kLocal, s.message());
  if (m.job != options_.job || m.step != id.step || m.rank != id.rank) {
    return NotHeld(id, CopyPlace::kLocal,
                   fmt::format("its manifest names job '{}' step {} rank {}", m.job, m.step, m.rank));
  }
  if (m.torn) return NotHeld(id, CopyPlace::kLocal, "the copy is torn");
  const std::string path = ckpt::DataPath(options_.local_dir, options_.job, id);
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return NotHeld(id, CopyPlace::kLocal, Status::FromErrno(errno, path).message());
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_size) < m.data_bytes) {
    close(fd);
    return NotHeld(id, CopyPlace::kLocal, fmt::format("{} is shorter than its manifest's {} bytes", path, m.data_bytes));
  }
  uint8_t* base = nullptr;
  uint64_t mapped = m.data_bytes;
  if (mapped > 0) {
    void* p = mmap(nullptr, mapped, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      Status failed = Status::FromErrno(errno, fmt::format("mmap {}", path));
      close(fd);
      return NotHeld(id, CopyPlace::kLocal, failed.message());
    }
    base = static_cast<uint8_t*>(p);
  }
  close(fd);
  *out = std::make_shared<FileRegion>(base, mapped, m.data_bytes, ckpt::EncodeManifest(m), options_.unmapped);
  return Status::Ok();
}

}  // namespace ft::worker
