#include "ftworker/stacks/stack_capture.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>

extern char** environ;

namespace ft::worker {
namespace {

constexpr size_t kMaxOutput = 256 * 1024;  // a process with thousands of threads: enough

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

}  // namespace

std::vector<StackThread> ParseEuStack(std::string_view text) {
  std::vector<StackThread> threads;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = Trim(text.substr(0, nl));
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (line.rfind("TID ", 0) == 0) {
      StackThread t;
      std::string_view n = line.substr(4);
      std::from_chars(n.data(), n.data() + n.size(), t.tid);
      threads.push_back(std::move(t));
      continue;
    }
    // "#3  0x000055912c1d41ea execute_command_internal" (the symbol may be missing).
    if (line.empty() || line[0] != '#' || threads.empty()) continue;
    const size_t addr = line.find("0x");
    if (addr == std::string_view::npos) continue;
    std::string_view rest = line.substr(addr);
    const size_t space = rest.find(' ');
    std::string_view symbol = space == std::string_view::npos ? std::string_view() : Trim(rest.substr(space + 1));
    // eu-stack -m appends " - /path/module": not asked for, but tolerated.
    if (const size_t dash = symbol.find(" - /"); dash != std::string_view::npos) symbol = symbol.substr(0, dash);
    threads.back().frames.emplace_back(symbol.empty() ? "??" : std::string(symbol));
  }
  return threads;
}

std::string SummarizeStacks(const std::vector<StackThread>& threads, int pid, size_t max_frames, size_t max_bytes) {
  std::vector<const StackThread*> order;
  for (const StackThread& t : threads) order.push_back(&t);
  std::stable_partition(order.begin(), order.end(), [pid](const StackThread* t) { return t->tid == pid; });
  std::string out;
  for (size_t k = 0; k < order.size(); ++k) {
    const StackThread* t = order[k];
    std::string line = fmt::format("tid {}:", t->tid);
    for (size_t i = 0; i < t->frames.size() && i < max_frames; ++i) {
      line += (i == 0 ? " " : " <- ") + t->frames[i].substr(0, 160);
    }
    if (t->frames.size() > max_frames) line += fmt::format(" <- ({} more)", t->frames.size() - max_frames);
    line += "\n";
    if (out.size() + line.size() > max_bytes) {
      out += fmt::format("({} more threads)\n", order.size() - k);
      break;
    }
    out += line;
  }
  return out;
}

StackCapture::~StackCapture() {
  if (!reaped_) {
    kill(child_, SIGKILL);
    waitpid(child_, nullptr, 0);
  }
  close(out_fd_);
}

Status StackCapture::Start(const std::string& tool, int pid, uint64_t now_ns, std::unique_ptr<StackCapture>* out) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return Status::FromErrno(errno, "pipe for the stack tool");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
  const std::string pid_text = std::to_string(pid);
  std::vector<char*> argv = {const_cast<char*>(tool.c_str()), const_cast<char*>("-p"),
                             const_cast<char*>(pid_text.c_str()), nullptr};
  pid_t child = 0;
  const int rc = posix_spawnp(&child, tool.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    return Status::Unavailable(fmt::format("cannot run {}: {} (install elfutils)", tool, std::strerror(rc)));
  }
  fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK);
  out->reset(new StackCapture(child, fds[0], pid, now_ns));
  return Status::Ok();
}

void StackCapture::Drain() {
  char buf[8192];
  for (;;) {
    ssize_t n = read(out_fd_, buf, sizeof(buf));
    if (n <= 0) return;
    if (output_.size() < kMaxOutput) output_.append(buf, static_cast<size_t>(std::min<ssize_t>(n, kMaxOutput)));
  }
}

bool StackCapture::Poll(uint64_t now_ns, std::string* summary, Status* status) {
  Drain();
  int wstatus = 0;
  const pid_t done = reaped_ ? child_ : waitpid(child_, &wstatus, WNOHANG);
  if (done == 0) {
    if (now_ns - started_ns_ < kTimeoutNs) return false;
    kill(child_, SIGKILL);
    waitpid(child_, nullptr, 0);
    reaped_ = true;
    *status = Status::Timeout(fmt::format("the stack of pid {} took more than {} s", target_, kTimeoutNs / 1000000000));
    return true;
  }
  reaped_ = true;
  Drain();
  std::vector<StackThread> threads = ParseEuStack(output_);
  bool any_frame = std::any_of(threads.begin(), threads.end(), [](const StackThread& t) { return !t.frames.empty(); });
  if (!any_frame) {
    // eu-stack says why on its output ("no such process", "Operation not permitted").
    std::string why(Trim(std::string_view(output_).substr(0, 300)));
    std::replace(why.begin(), why.end(), '\n', ' ');
    *status = Status::Unavailable(fmt::format("no stack of pid {}: {}", target_, why.empty() ? "the tool said nothing" : why));
    return true;
  }
  *summary = SummarizeStacks(threads, target_);
  *status = Status::Ok();
  return true;
}

}  // namespace ft::worker
