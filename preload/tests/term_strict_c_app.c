/* term_signal_test.py's case strict-c-signal: a C program compiled as strict ISO C (no
 * _DEFAULT_SOURCE), whose signal() glibc's header binds to __sysv_signal. Registers 256 KiB of
 * host state, installs its SIGTERM handler with signal() after ft_register_end (ft has armed
 * SIGTERM by then), then per step fills every byte with step & 0xff, calls ft_step_done and
 * prints "step <s>"; the handler prints "app handler sig=<s> count=1" and ends the loop, and
 * the program exits 0 after "exiting count=1". */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "include/ft/ft.h"

static volatile sig_atomic_t g_handled = 0;

static void Handler(int sig) {
  char line[64];
  int n = snprintf(line, sizeof line, "app handler sig=%d count=1\n", sig);
  if (write(1, line, (size_t)n) < 0) return;
  g_handled = 1;
}

int main(void) {
  static unsigned char state[256 * 1024];
  int step;
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (ft_register("state", state, sizeof state) != FT_OK || ft_register_end() != FT_OK) {
    printf("ft: %s\n", ft_last_error());
  }
  signal(SIGTERM, Handler); /* __sysv_signal: reset on entry, not blocked while it runs */
  for (step = 1; !g_handled; ++step) {
    struct timespec ts = {0, 20 * 1000000L};
    ft_update_begin(NULL);
    memset(state, step & 0xff, sizeof state);
    ft_step_done(step);
    printf("step %d\n", step);
    while (nanosleep(&ts, &ts) != 0 && !g_handled) {
    }
  }
  printf("exiting count=1\n");
  return 0;
}
