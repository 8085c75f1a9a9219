// ft::master::WindowReads: which progress tables an open incident window needs, so the master
// reads those (HMGET) instead of every rank's table (131k ranks: 120 MB per read).
//
// The window's reports are the members of its communicators: those of its timeout events, all
// communicators of ranks that raised other events, and, transitively, those on which such
// members wait (a row with started > completed) — the set WindowCanClose and Attribute look
// at (attribution.h). A member whose report is missing or older than the window's first event
// is still needed; once all are fresh the window may close. Attribution over these members
// alone names the same roots: every communicator someone waits on is read whole, so every
// blocker is seen; ranks outside it neither wait on nor block the window's waits.
//
// The communicator index is rebuilt when the membership changes (Rebuild), the closure at
// every Plan: its cost is the closure's size, not the job's. Not thread-safe: the loop owns it.
#ifndef FT_FTMASTER_WINDOW_READS_H_
#define FT_FTMASTER_WINDOW_READS_H_

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "proto/messages.h"

namespace ft::master {

class WindowReads {
 public:
  // From the whole membership (every rank's communicators).
  void Rebuild(std::span<const proto::Membership> membership);

  struct Plan {
    std::vector<int> members;  // every rank of the window's communicators, ascending
    std::vector<int> needed;   // those whose report is missing or older than the first event
  };
  // `progress`: the tables read so far (any order, newest observed_unix_ms wins), `events`:
  // the window's events (their tables count as reports).
  Plan Make(std::span<const proto::RankProgress> progress,
            std::span<const proto::Event> events) const;

  // The membership values of `ranks` (those the index knows), for AttributionInput.
  std::vector<proto::Membership> MembershipOf(const std::vector<int>& ranks) const;

 private:
  std::span<const proto::Membership> membership_;
  std::unordered_map<int, int> rank_index_;                 // rank -> membership_ index
  std::unordered_map<uint64_t, std::vector<int>> members_;  // comm id -> its ranks
};

}  // namespace ft::master

#endif  // FT_FTMASTER_WINDOW_READS_H_
