// A test process outlives no `swift test` that started it.
//
// `swift test` runs the test binary as a child. When `swift test` is killed from outside (a CI
// step's time limit, a developer's ^C that reaches only the parent), the child is re-parented and
// would go on running, holding a core and its files. Linked into the test binary, this constructor
// starts a thread that looks at the parent once every 200 ms and ends the process as soon as it
// changed: no test runs past its runner.

#include "TestProcessGuard.h"

#if defined(__linux__)
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static pid_t original_parent;
static int running;

static void *watch_parent(void *unused) {
  (void)unused;
  const struct timespec interval = {0, 200 * 1000 * 1000};
  for (;;) {
    nanosleep(&interval, NULL);
    if (getppid() != original_parent) {
      static const char message[] = "test process: the process that started it is gone; exiting\n";
      (void)!write(STDERR_FILENO, message, sizeof message - 1);
      _exit(70);
    }
  }
  return NULL;
}

__attribute__((constructor)) static void start_guard(void) {
  // Line by line, also into a pipe: when a time limit kills the run, its log ends with the tests
  // that were running, not with whatever a full buffer last held.
  setvbuf(stdout, NULL, _IOLBF, 0);
  original_parent = getppid();
  if (original_parent <= 1) return;  // started by init: nothing to outlive
  pthread_attr_t attributes;
  pthread_t thread;
  if (pthread_attr_init(&attributes) != 0) return;
  pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attributes, 64 * 1024);
  if (pthread_create(&thread, &attributes, watch_parent, NULL) == 0) running = 1;
  pthread_attr_destroy(&attributes);
}

int test_process_guard_is_running(void) { return running; }
#else
int test_process_guard_is_running(void) { return 0; }
#endif
