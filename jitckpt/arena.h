// ft::ckpt::Arena: one rank's host checkpoint arena — a file in FT_CKPT_ARENA_DIR (default
// /dev/shm) that outlives the process, so a restarted rank on the same node, a same-node
// peer and ftworker find the last committed copy in memory.
//
//   name      <arena_dir>/ft-ckpt.<job>.<rank>     (job sanitized as segment names)
//   mode      0600, owned by the training user; readers check owner and size
//   offset 0  ArenaHeader (4 KiB)                  magic, version, geometry, commit words
//   4096      one manifest region per slot         a committed manifest's bytes
//   data_off  one data region per slot             each aligned to 2 MiB (huge pages, O_DIRECT)
//
// Two slots (FT_CKPT_ARENA_SLOTS=2, the default): a save writes the slot that does not hold the
// committed copy and its commit flips which slot does, so a committed copy is only ever
// replaced by a newer committed one — a save that fails, is given up, or dies with its process
// (SIGKILL mid-save) leaves the previous copy committed and readable. (One exception, asked for:
// RecommitOlderSlot hands the commit back to the older copy so that the next save replaces the
// newer one.) One slot halves the
// memory; then a save overwrites the committed copy in place and a failed save leaves none.
//
// Commit protocol, per slot a seqlock: BeginWrite picks the slot (its sequence becomes odd),
// the writer fills the slot's data, then Commit(manifest) writes the slot's manifest, makes its
// sequence even again and publishes the slot as the committed one (release). A reader takes
// ReadCommitted (manifest + a generation naming the slot and its sequence, acquire), reads
// data(generation), then checks StillCommitted(generation): false means a newer save began
// writing that slot meanwhile and the copy must be discarded. Chunk checksums catch what the
// sequence cannot (a bad page).
//
// A torn copy (saved while the optimizer may have been writing: never restored) does not replace
// a whole committed copy: with two slots it is written to the free slot and left uncommitted
// there (ReadSlot reads it; the next save overwrites it), so the whole copy of the step before
// stays the committed one. It is committed only where no whole copy is (one slot, or none yet).
//
// One writer (the rank's agent thread); any number of readers in other processes. The space
// is reserved with posix_fallocate before the first save (at open, or by PrepareSlot for an
// arena whose writer readies it off its caller's path), and the free space is checked at open,
// so a full /dev/shm is an error at registration or before the first save, never a SIGBUS.
#ifndef FT_JITCKPT_ARENA_H_
#define FT_JITCKPT_ARENA_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "jitckpt/manifest.h"

namespace ft::ckpt {

inline constexpr uint64_t kArenaMagic = 0x31414e4552414b43ull;  // "CKARENA1" read as bytes
inline constexpr uint32_t kArenaVersion = 2;  // 1: one slot, no slot words (never read)
inline constexpr int kArenaMaxSlots = 2;
inline constexpr uint64_t kArenaDataAlign = 2ull << 20;

// When OpenForWrite readies the data regions (reserves their blocks and maps their pages):
// kNow, before it returns; kByWriter, when the writer calls PrepareSlot (each slot) or
// PrepareData, before its first BeginWrite (libft.so's agent thread does, so ft_register_end
// does not wait for it).
enum class ArenaPrep { kNow, kByWriter };

class Arena {
 public:
  Arena() = default;
  ~Arena();  // unmaps; never removes the file
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  Arena(Arena&&) noexcept;
  Arena& operator=(Arena&&) noexcept;

  static std::string PathFor(std::string_view arena_dir, std::string_view job, int rank);
  // Where ftworker keeps a copy of `rank`'s shard it pulled from another node before the rank
  // started (ftworker/prefetch/prefetcher.h): <arena_dir>/ft-prefetch.<job>.<rank>. The same format as
  // the rank's own arena, which stays untouched; List (and so the keeper) never sees it.
  static std::string PrefetchPathFor(std::string_view arena_dir, std::string_view job, int rank);
  // Where ftworker keeps its buddy copy of another node's rank (ftworker/prefetch/replicator.h):
  // <arena_dir>/ft-replica.<job>.<rank>, two slots (a pull in progress never costs the last
  // copy). The same format as the rank's own arena; List never sees it.
  static std::string ReplicaPathFor(std::string_view arena_dir, std::string_view job, int rank);

  // Writer: opens the rank's arena, creating or resizing it to hold `slots` (1 or 2) copies,
  // each a manifest of manifest_capacity bytes and data_bytes of data. An existing arena of
  // exactly that geometry keeps its committed copy (a restarted rank restores it); a slot a
  // dead writer left half-written is dropped. Any other geometry is reset to empty. The whole
  // file is reserved with posix_fallocate: IoError naming the directory and the bytes missing
  // when it does not fit (the file is then removed). Huge pages advised.
  // With ArenaPrep::kByWriter only the header and manifests are reserved here (the free space
  // is still checked for the whole file) and the data regions wait for PrepareSlot.
  static Status OpenForWrite(std::string_view arena_dir, std::string_view job, int rank,
                             uint64_t manifest_capacity, uint64_t data_bytes, int slots, Arena* out,
                             ArenaPrep prep = ArenaPrep::kNow);
  // The same at an explicit path (the prefetch arena): same geometry rules, 0600, reserved up
  // front with the free space of the path's directory checked first.
  static Status OpenForWriteAt(const std::string& path, uint64_t manifest_capacity, uint64_t data_bytes,
                               int slots, Arena* out, ArenaPrep prep = ArenaPrep::kNow);
  // Writer of an arena opened kByWriter, before a write into `slot`: reserves the slot's data
  // region (ReserveSlot) and maps its pages writable (PopulateForWrite on `threads`, 1 GiB at a
  // time; once *stop is set the rest is left to fault in at first use). IoError when the
  // directory ran out of room since the open: the arena is then closed (is_open() false) and,
  // when that open created it, removed. Nothing to do (Ok) for a slot prepared before, or any
  // slot of an arena opened kNow. IoError again once the arena was closed that way.
  Status PrepareSlot(int slot, int threads, const std::atomic<bool>* stop = nullptr);
  // Only PrepareSlot's reservation (posix_fallocate; the same errors): a write may then go to
  // the slot, paying its pages' first faults itself. Quick where the slot's blocks exist (it held
  // a copy). BeginWrite reserves the slot it picks when nobody did: no write meets a full
  // directory as a SIGBUS.
  Status ReserveSlot(int slot);
  // PrepareSlot of every slot, from slot 0.
  Status PrepareData(int threads, const std::atomic<bool>* stop = nullptr);
  // Writer: PrepareSlot (or a kNow open) readied this slot.
  bool slot_prepared(int slot) const { return slot >= 0 && slot < slots_ && ((prepared_mask_ >> slot) & 1u) != 0; }
  // Writer: the slot holding the committed copy, -1 when none (read as ReadCommitted does).
  int committed_slot() const;
  // Writer: this open created the file (it held no copy).
  bool created() const { return created_; }
  // Reader (ftworker, a peer's ft_restore): maps read-only. Corrupt when the header is not a
  // valid arena or the file is shorter than its header claims or not owned by this user;
  // Unsupported, naming both versions, for an arena of another version; NotFound when there
  // is no such file.
  static Status OpenForRead(const std::string& path, Arena* out);

  bool is_open() const { return base_ != nullptr; }
  const std::string& path() const { return path_; }
  int slot_count() const { return slots_; }
  uint64_t data_capacity() const { return data_capacity_; }  // the bytes one copy can hold
  // Every slot's data region, contiguous: what the agent pins and the NIC registers.
  uint8_t* slots_data() const { return base_ == nullptr ? nullptr : base_ + data_offset_; }
  uint64_t slots_bytes() const { return data_capacity_ * static_cast<uint64_t>(slots_); }
  uint64_t mapped_bytes() const { return mapped_; }
  // The pid of the last process that opened it for writing (the header's writer_pid; 0 when
  // not open). ftworker gc keeps an arena whose writer still lives.
  int writer_pid() const;

  // Writer side of the commit protocol. BeginWrite returns the data region the new copy goes
  // to (the same one again while a write is open); nullptr for a reader, or when the slot was
  // not reserved yet and its reservation failed (ReserveSlot: the arena is closed). Commit
  // publishes it: InvalidArgument when the manifest does not fit. AbandonWrite gives the write
  // up: with two slots the committed copy stays, with one the arena holds none.
  uint8_t* BeginWrite();
  uint8_t* write_data() const;  // the slot being written; nullptr when no write is open
  Status Commit(const Manifest& m);
  void AbandonWrite();

  // Reader side. NotFound when nothing is committed (empty, or with one slot a write in
  // progress). The generation names the copy: data(generation) is its data region.
  Status ReadCommitted(Manifest* m, uint64_t* generation) const;
  const uint8_t* data(uint64_t generation) const;
  bool StillCommitted(uint64_t generation) const;
  // One slot's copy, committed or not (a torn copy kept beside a whole one): NotFound when the
  // slot holds none or a save is writing it. data() and StillCommitted() take its generation
  // as they take a committed copy's (StillCommitted: the slot was not written since).
  Status ReadSlot(int slot, Manifest* m, uint64_t* generation) const;

  // The whole copy of `step` in any slot: the committed one when it holds that step, else the
  // other slot's (the copy of the step before, kept until the next save: a plan that restores
  // it after a newer step was saved on some ranks, a preemption's split). NotFound when no slot
  // holds a whole copy of that step.
  Status ReadStep(int64_t step, Manifest* m, uint64_t* generation) const;
  // Writer, no write open: makes the copy `generation` names (ReadStep's) the committed one —
  // a restore that used the other slot's copy rewinds the arena to it, so readers, the next
  // save (which then writes the other slot) and a restarted rank all see the restored step.
  // NotReady when the slot was written since or holds no copy.
  Status MakeCommitted(uint64_t generation);

  // Writer, no write open: makes the other slot's copy the committed one when it is whole and
  // of an older step than the committed copy, so the next save writes over the copy committed
  // now and the older one stays. A termination's one step more uses it to replace the copy its
  // first save took (which a crashed peer never took) instead of the older copy every rank
  // holds. NotFound (nothing changed) when the other slot holds no such copy.
  Status RecommitOlderSlot();

  // Arena files of `job` in `arena_dir` (ftworker scans them), full paths, sorted by rank.
  static std::vector<std::string> List(std::string_view arena_dir, std::string_view job);
  // The rank of an arena path, or -1.
  static int RankOf(std::string_view path);

 private:
  // Takes a mapping whose geometry the caller wrote or validated.
  Arena(std::string path, uint8_t* base, bool writable, uint64_t mapped, int slots,
        uint64_t manifest_capacity, uint64_t data_offset, uint64_t data_capacity)
      : path_(std::move(path)), base_(base), mapped_(mapped), writable_(writable), slots_(slots),
        manifest_capacity_(manifest_capacity), data_offset_(data_offset),
        data_capacity_(data_capacity) {}

  int SlotOf(uint64_t generation) const { return static_cast<int>(generation & 1); }
  // [begin, end) of `slot`'s data region in the mapping (the last slot's runs to the file's end).
  std::pair<uint64_t, uint64_t> SlotRange(int slot) const;
  // Records the kept file (reserve_fd_) and marks the slots an open readied as reserved and
  // prepared: every slot for kNow, none for kByWriter.
  void SetPrepared(int reserve_fd);
  bool CommittedIsWhole() const;  // the committed copy is readable and not torn
  // One read of `slot`'s manifest (the seqlock's reader half). *busy (NotFound): a save is
  // writing the slot, or began while it was read. `committed`: the slot is the committed one,
  // so an empty manifest is damage (Corrupt from the parse), not "no copy".
  enum class SlotBusy { kNo, kWriting, kBegan };
  Status ReadSlotOnce(int slot, bool committed, SlotBusy* busy, Manifest* m, uint64_t* generation) const;

  std::string path_;
  uint8_t* base_ = nullptr;
  uint64_t mapped_ = 0;
  bool writable_ = false;
  int writing_slot_ = -1;  // writer: the slot BeginWrite opened, -1 when none
  // The geometry as validated at open: a reader never re-reads it from the shared header.
  int slots_ = 0;
  uint64_t manifest_capacity_ = 0;  // per slot
  uint64_t data_offset_ = 0;        // slot 0's data; slot i's is i * data_capacity_ further
  uint64_t data_capacity_ = 0;
  // Writer: the file kept open (kByWriter: -1 once every slot is reserved, kNow: -1 at once)
  // and which slots are reserved and prepared (bit i: slot i).
  int reserve_fd_ = -1;
  uint32_t reserved_mask_ = 0;
  uint32_t prepared_mask_ = 0;
  bool created_ = false;  // writer: this open created the file (it held no copy)
};

}  // namespace ft::ckpt

#endif  // FT_JITCKPT_ARENA_H_
