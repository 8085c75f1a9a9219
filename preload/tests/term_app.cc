// A training loop with host state for the termination-save tests (term_signal_test.py), run
// under LD_PRELOAD=libft.so, and the check of what its arena holds afterwards.
//
//   term_app run [--handler none|app|ign|info|log] [--handler-after] [--resethand]
//                [--install sigaction|signal|bsd_signal|sysv_signal|sigset] [--register 0|1]
//                [--kib N] [--step-ms M] [--update-ms U] [--fork-child] [--block-read]
//                [--max-steps S] [--exit-after S [--exit-code C] [--exit-in-update]]
//                [--save-on-failure-after S] [--return-after S [--exit-code C]] [--static-state]
//                [--throw-after S [--app-terminate [--late] [--chain]]]
//     registers N KiB of host state, then per step: ft_update_begin, U ms inside the update
//     (the state is rewritten byte by byte), every byte = step & 0xff, ft_step_done(step),
//     "step <s> eintr=<n>" printed (n: sleeps interrupted so far), M ms of
//     "forward/backward". The app's own handler of SIGTERM (and SIGINT), installed before
//     ft_register_end or after (--handler-after), with sigaction (or --install's function),
//     prints "app handler sig=<s> count=<n> code=<si_code> pid=<si_pid>" and ends the loop: the
//     program exits 0 after "exiting count=<n>". "log" only prints (the loop goes on).
//     --resethand: the handler is SA_RESETHAND. An atexit
//     handler, registered first, prints "atexit handler ran" without a newline (only exit's
//     stdio flush writes it). --block-read: after step 3 it blocks in read(stdin) and exits 0
//     when the read returns (EOF or an interrupted call). --max-steps: after step S it idles
//     (prints "idle after step S") until a handler of its own ran. --exit-after: exit(C)
//     after step S (--exit-in-update: inside step S+1's update, half of it written).
//     --return-after: returns C from main after step S (the state, a std::vector local to the
//     function main returns from, is freed first; --kib 64 keeps it on the heap, not mmap'd).
//     --static-state: the state is a static array (at most 1024 KiB) instead of that vector.
//     --throw-after: after step S a std::runtime_error leaves main uncaught (std::terminate, then
//     abort). --app-terminate: a terminate handler of the app's, set before registration,
//     prints "app terminate handler" and aborts; --late: set after registration, before the
//     first step; --chain: it then calls the handler it replaced instead of aborting.
//     --save-on-failure-after: ft_save_on_failure before registration ("early result=<r>"),
//     then after step S from two threads at once ("save_on_failure results=<a>,<b>"), then
//     exit(0).
//   term_app check --arena-dir D --job J --rank R [--slots 1]
//     prints "arena step=<s> torn=<0|1> content=<ok|mixed>": content ok when every byte
//     of the state is the fill of the step the manifest names. --slots 1: then a line
//     "slot <i> step=<s> torn=<0|1> content=<ok|mixed>" for each slot holding a copy.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "include/ft/ft.h"
#include "jitckpt/arena.h"
#include "jitckpt/manifest.h"

namespace {

// glibc still exports bsd_signal but no longer declares it.
extern "C" sighandler_t bsd_signal(int sig, sighandler_t handler);

std::atomic<int> g_handled{0};
unsigned char g_static_state[1 << 20];
std::atomic<int> g_logged{0};
std::atomic<int> g_eintr{0};

void Say(const char* text) {
  ssize_t ignored = write(1, text, strlen(text));
  (void)ignored;
}

void PlainHandler(int sig) {
  int n = g_handled.fetch_add(1) + 1;
  char line[128];
  snprintf(line, sizeof line, "app handler sig=%d count=%d code=none pid=none\n", sig, n);
  Say(line);
}

void LogHandler(int sig) {
  int n = g_logged.fetch_add(1) + 1;
  char line[128];
  snprintf(line, sizeof line, "app handler logged sig=%d count=%d\n", sig, n);
  Say(line);
}

void AtExit() { printf("atexit handler ran"); }

void InfoHandler(int sig, siginfo_t* info, void*) {
  int n = g_handled.fetch_add(1) + 1;
  char line[128];
  snprintf(line, sizeof line, "app handler sig=%d count=%d code=%d pid=%d\n", sig, n, info->si_code,
           static_cast<int>(info->si_pid));
  Say(line);
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
void SysvSigset(int sig, sighandler_t handler) { sigset(sig, handler); }
#pragma GCC diagnostic pop

void Install(const std::string& kind, const std::string& how, bool resethand) {
  struct sigaction a;
  memset(&a, 0, sizeof a);
  sigemptyset(&a.sa_mask);
  if (kind == "app") {
    a.sa_handler = PlainHandler;
  } else if (kind == "info") {
    a.sa_sigaction = InfoHandler;
    a.sa_flags = SA_SIGINFO;
  } else if (kind == "ign") {
    a.sa_handler = SIG_IGN;
  } else if (kind == "log") {
    a.sa_handler = LogHandler;
  } else {
    return;
  }
  if (resethand) a.sa_flags |= SA_RESETHAND;
  for (int sig : {SIGTERM, SIGINT}) {
    if (how == "signal") signal(sig, a.sa_handler);
    else if (how == "bsd_signal") bsd_signal(sig, a.sa_handler);
    else if (how == "sysv_signal") sysv_signal(sig, a.sa_handler);
    else if (how == "sigset") SysvSigset(sig, a.sa_handler);
    else sigaction(sig, &a, nullptr);
  }
  // What the app reads back is its own disposition, whatever libft.so installed.
  struct sigaction back;
  sigaction(SIGTERM, nullptr, &back);
  const bool same = (kind == "info") ? back.sa_sigaction == InfoHandler : back.sa_handler == a.sa_handler;
  printf("handler %s reads back %s\n", kind.c_str(), same ? "its own" : "another");
}

void Sleep(int ms) {
  struct timespec ts{ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
    if (errno == EINTR) g_eintr.fetch_add(1);
  }
}

// The app's terminate handler: says it ran, then aborts, or (chain) calls the one it replaced,
// as a handler that means to keep the runtime's message does.
std::terminate_handler g_app_replaced = nullptr;
bool g_app_chains = false;
void SetAppTerminate(bool chain) {
  g_app_chains = chain;
  g_app_replaced = std::set_terminate([] {
    Say("app terminate handler\n");
    if (g_app_chains && g_app_replaced != nullptr) g_app_replaced();
    std::abort();
  });
}

int Run(int argc, char** argv) {
  std::string handler = "none", how = "sigaction";
  bool after = false, reg = true, fork_child = false, block_read = false, resethand = false, exit_in_update = false;
  bool static_state = false, app_terminate = false, terminate_late = false, terminate_chain = false;
  int kib = 256, step_ms = 20, update_ms = 0, max_steps = 0, exit_after = 0, exit_code = 1, save_after = 0,
      return_after = 0, throw_after = 0;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--handler") handler = next();
    else if (a == "--handler-after") after = true;
    else if (a == "--register") reg = next() != "0";
    else if (a == "--kib") kib = atoi(next().c_str());
    else if (a == "--step-ms") step_ms = atoi(next().c_str());
    else if (a == "--update-ms") update_ms = atoi(next().c_str());
    else if (a == "--fork-child") fork_child = true;
    else if (a == "--block-read") block_read = true;
    else if (a == "--max-steps") max_steps = atoi(next().c_str());
    else if (a == "--resethand") resethand = true;
    else if (a == "--install") how = next();
    else if (a == "--exit-after") exit_after = atoi(next().c_str());
    else if (a == "--exit-code") exit_code = atoi(next().c_str());
    else if (a == "--exit-in-update") exit_in_update = true;
    else if (a == "--save-on-failure-after") save_after = atoi(next().c_str());
    else if (a == "--return-after") return_after = atoi(next().c_str());
    else if (a == "--static-state") static_state = true;
    else if (a == "--throw-after") throw_after = atoi(next().c_str());
    else if (a == "--app-terminate") app_terminate = true;
    else if (a == "--late") terminate_late = true;
    else if (a == "--chain") terminate_chain = true;
    else { fprintf(stderr, "term_app: unknown flag %s\n", a.c_str()); return 2; }
  }
  setvbuf(stdout, nullptr, _IOLBF, 0);
  atexit(AtExit);
  const size_t state_bytes = static_cast<size_t>(kib) * 1024;
  if (static_state && state_bytes > sizeof(g_static_state)) {
    fprintf(stderr, "term_app: --static-state holds at most %zu KiB\n", sizeof(g_static_state) / 1024);
    return 2;
  }
  std::vector<unsigned char> heap_state(static_state ? 0 : state_bytes, 0);
  unsigned char* state = static_state ? g_static_state : heap_state.data();
  if (save_after > 0) printf("early result=%d\n", ft_save_on_failure());
  if (!after) Install(handler, how, resethand);
  if (app_terminate && !terminate_late) SetAppTerminate(terminate_chain);
  if (reg) {
    if (ft_register("state", state, state_bytes) != FT_OK || ft_register_end() != FT_OK) {
      printf("ft: %s\n", ft_last_error());
    }
  }
  if (app_terminate && terminate_late) SetAppTerminate(terminate_chain);
  if (after) Install(handler, how, resethand);
  for (int step = 1; g_handled.load() == 0; ++step) {
    ft_update_begin(nullptr);
    const unsigned char fill = static_cast<unsigned char>(step & 0xff);
    if (update_ms > 0) {
      // The update is slow: half the bytes now, the rest after update_ms.
      memset(state, fill, state_bytes / 2);
      Sleep(update_ms);
    }
    memset(state, fill, state_bytes);
    ft_step_done(step);
    printf("step %d eintr=%d\n", step, g_eintr.load());
    if (exit_after > 0 && step == exit_after) {
      if (exit_in_update) {
        ft_update_begin(nullptr);  // no stream: the update may already be running
        memset(state, static_cast<unsigned char>((step + 1) & 0xff), state_bytes / 2);
        printf("exit(%d) inside the update of step %d\n", exit_code, step + 1);
      } else {
        printf("exit(%d) after step %d\n", exit_code, step);
      }
      exit(exit_code);  // the state stays alive: exit() does not unwind
    }
    if (throw_after > 0 && step == throw_after) {
      printf("throwing after step %d\n", step);
      throw std::runtime_error("term_app: thrown after step " + std::to_string(step));  // nothing catches it
    }
    if (return_after > 0 && step == return_after) {
      printf("return %d from main after step %d\n", exit_code, step);
      return exit_code;  // heap_state is freed on the way out of main
    }
    if (save_after > 0 && step == save_after) {
      std::atomic<int> other{-1};
      std::thread t([&] { other.store(ft_save_on_failure()); });
      const int mine = ft_save_on_failure();
      t.join();
      printf("save_on_failure results=%d,%d\n", mine, other.load());
      exit(0);
    }
    if (step == 1) {
      printf("ready pid=%d\n", static_cast<int>(getpid()));
      if (fork_child) {
        pid_t child = fork();
        if (child == 0) {
          for (;;) Sleep(1000);
        }
        printf("child pid=%d\n", static_cast<int>(child));
      }
    }
    Sleep(step_ms);
    if (max_steps > 0 && step == max_steps) {
      printf("idle after step %d\n", step);  // alive, no more updates: waits for signals
      while (g_handled.load() == 0) Sleep(10);
      break;
    }
    if (block_read && step == 3) {
      // Waits on stdin like a server loop; an interrupted read ends the program with 0.
      char c;
      ssize_t n = read(0, &c, 1);
      printf("read returned %zd (%s): exiting 0\n", n, n < 0 ? strerror(errno) : "eof");
      return 0;
    }
  }
  printf("exiting count=%d\n", g_handled.load());
  return 0;
}

// Every byte of the copy is the fill of the step its manifest names.
bool HoldsItsStep(const ft::ckpt::Manifest& m, const unsigned char* data) {
  const unsigned char fill = static_cast<unsigned char>(m.step & 0xff);
  bool ok = !m.buffers.empty();
  for (const ft::ckpt::BufferEntry& b : m.buffers) {
    for (uint64_t i = 0; i < b.bytes && ok; ++i) ok = data[b.offset + i] == fill;
  }
  return ok;
}

int Check(int argc, char** argv) {
  std::string dir, job;
  int rank = 0;
  bool slots = false;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--arena-dir") dir = argv[i + 1];
    else if (a == "--job") job = argv[i + 1];
    else if (a == "--rank") rank = atoi(argv[i + 1]);
    else if (a == "--slots") slots = std::string(argv[i + 1]) == "1";
  }
  ft::ckpt::Arena arena;
  ft::Status s = ft::ckpt::Arena::OpenForRead(ft::ckpt::Arena::PathFor(dir, job, rank), &arena);
  ft::ckpt::Manifest m;
  uint64_t generation = 0;
  if (s.ok()) s = arena.ReadCommitted(&m, &generation);
  if (!s.ok()) {
    printf("arena none: %s\n", s.ToString().c_str());
    return 1;
  }
  printf("arena step=%lld torn=%d content=%s\n", static_cast<long long>(m.step), m.torn ? 1 : 0,
         HoldsItsStep(m, arena.data(generation)) ? "ok" : "mixed");
  for (int slot = 0; slots && slot < arena.slot_count(); ++slot) {
    ft::ckpt::Manifest copy;
    uint64_t copy_generation = 0;
    if (!arena.ReadSlot(slot, &copy, &copy_generation).ok()) continue;
    printf("slot %d step=%lld torn=%d content=%s\n", slot, static_cast<long long>(copy.step), copy.torn ? 1 : 0,
           HoldsItsStep(copy, arena.data(copy_generation)) ? "ok" : "mixed");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "run") return Run(argc, argv);
  if (argc >= 2 && std::string(argv[1]) == "check") return Check(argc, argv);
  fprintf(stderr, "usage: term_app run|check ...\n");
  return 2;
}
