// The model's rank arena: jitckpt/arena.h's two-slot rule without the bytes. A save writes the
// slot that does not hold the committed copy (unreadable while it is written); a whole save
// commits there when it ends, so the committed copy it replaces stays readable as the other
// slot's copy until the next save overwrites it. A torn save (inside the optimizer update) also
// writes the free slot but never becomes the committed copy while a whole one exists. A rank
// killed mid-save leaves that slot empty (the seqlock stays odd: readers drop it).
#ifndef FT_TESTS_MODEL_MODEL_ARENA_H_
#define FT_TESTS_MODEL_MODEL_ARENA_H_

#include <cstdint>
#include <string>

namespace ft::model {

// What a slot holds. `run`: the incarnation of the job that saved it (a copy restored by a
// later run keeps its saver's run: it is the same bytes).
struct SlotCopy {
  enum class State { kEmpty, kWriting, kHeld };
  State state = State::kEmpty;
  int64_t step = -1;
  uint64_t digest = 0;
  bool torn = false;
  std::string origin;         // "periodic", "just-in-time", "termination", "restore"
  int64_t saved_unix_ms = 0;  // when the save committed (the worker's saved_unix_ms)
  int run = 0;
  bool readable() const { return state == State::kHeld; }
};

class ModelArena {
 public:
  // The slot a save writes now: the one that is not committed.
  int FreeSlot() const { return committed_ < 0 ? 0 : 1 - committed_; }
  // Starts a save into the free slot; returns the slot.
  int BeginSave() {
    const int slot = FreeSlot();
    slots_[slot] = SlotCopy{};
    slots_[slot].state = SlotCopy::State::kWriting;
    return slot;
  }
  // Ends the save started at `slot`: a whole copy commits, a torn one commits only where no
  // whole copy is committed (arena.h).
  void FinishSave(int slot, SlotCopy copy) {
    copy.state = SlotCopy::State::kHeld;
    slots_[slot] = copy;
    const bool whole_committed = committed_ >= 0 && slots_[committed_].readable() && !slots_[committed_].torn;
    if (!copy.torn || !whole_committed) committed_ = slot;
  }
  // The writer died mid-save: the slot it wrote is dropped (OpenForWrite of the next process).
  void AbortSave(int slot) {
    if (slots_[slot].state == SlotCopy::State::kWriting) slots_[slot] = SlotCopy{};
  }
  // The restore loader made `slot` (holding the restored copy) the committed one.
  void CommitSlot(int slot) { committed_ = slot; }
  // Arena::RecommitOlderSlot: the other slot's whole, older copy becomes the committed one, so
  // the next save writes over the copy committed now. False (nothing changed) when there is none.
  bool RecommitOlderSlot() {
    if (committed_ < 0) return false;
    const SlotCopy& now = slots_[committed_];
    const SlotCopy& other = slots_[1 - committed_];
    if (!now.readable() || !other.readable() || other.torn || other.step >= now.step) return false;
    committed_ = 1 - committed_;
    return true;
  }

  int committed() const { return committed_; }
  const SlotCopy& slot(int i) const { return slots_[i]; }

 private:
  SlotCopy slots_[2];
  int committed_ = -1;  // -1: nothing committed yet
};

// The bytes of the state after step `step` of shard `shard` in an uninterrupted run (step 0: the
// initial state). A torn copy mixes two steps: another value, never equal to a whole one.
uint64_t TrueDigest(int64_t step, int shard);
uint64_t TornDigest(int64_t step, int shard, uint64_t salt);

}  // namespace ft::model

#endif  // FT_TESTS_MODEL_MODEL_ARENA_H_
