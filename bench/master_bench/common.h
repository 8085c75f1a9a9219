// master_bench: what every part of the bench shares: its clocks and how it fails. A failed
// check ends the whole bench at once (it is a program, not a library): there is nothing to
// recover, and the message says what went wrong.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace ft::bench {

using Clock = std::chrono::steady_clock;
using Ms = std::chrono::milliseconds;

// Wall-clock Unix ms: what the master, the workers' values and Redis stream ids all use.
int64_t UnixMs();
double MsSince(Clock::time_point start);

[[noreturn]] void Die(const std::string& message);
void Check(const Status& s, std::string_view doing);

}  // namespace ft::bench
