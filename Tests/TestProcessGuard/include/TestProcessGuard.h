#ifndef TEST_PROCESS_GUARD_H
#define TEST_PROCESS_GUARD_H

/// Whether the guard runs in this process: a thread that ends the test process when the process
/// that started it (`swift test`) is gone. Linux only; 0 elsewhere.
int test_process_guard_is_running(void);

#endif
