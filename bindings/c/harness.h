/* The check harness of the C test programs (test_inputs, test_lock, test_renew, test_wait,
 * test_shared_many, test_semaphore, test_fair): the CHECK macros and their counters, the
 * redis-server nodes' URLs (given as arguments), and helpers shared by several tests.
 * Header-only: each program includes it once; what a program does not use is static inline.
 *
 * `cargo test --test c_api` starts three nodes for each program and runs it, plain and under
 * valgrind --leak-check=full --error-exitcode=1. A program's main is
 *
 *     int main(int argc, char **argv) {
 *       if (!harness_start(argc, argv)) return 2;
 *       test_...();
 *       return harness_finish();
 *     }
 *
 * and its exit status is 0 only if every check passed. */
#ifndef REDLOCK_TEST_HARNESS_H
#define REDLOCK_TEST_HARNESS_H

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "redlock.h"

static int failures = 0;
static int checks = 0;

#define CHECK(cond)                                                          \
  do {                                                                       \
    checks++;                                                                \
    if (!(cond)) {                                                           \
      failures++;                                                            \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                        \
  } while (0)

#define CHECK_STATUS(expr, want)                                                        \
  do {                                                                                  \
    redlock_status got_ = (expr);                                                       \
    checks++;                                                                           \
    if (got_ != (want)) {                                                               \
      failures++;                                                                       \
      fprintf(stderr, "%s:%d: %s returned %s (%d), want %s\n", __FILE__, __LINE__, #expr, \
              redlock_status_str(got_), (int)got_, redlock_status_str(want));           \
    }                                                                                   \
  } while (0)

static const char **urls;
static int n_urls;

static inline void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Now (CLOCK_MONOTONIC). */
static inline struct timespec mono_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t;
}

/* Milliseconds since t0 (CLOCK_MONOTONIC). */
static inline long ms_since(const struct timespec *t0) {
  struct timespec t1;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return (t1.tv_sec - t0->tv_sec) * 1000 + (t1.tv_nsec - t0->tv_nsec) / 1000000;
}

/* Whether `v`, a lease's validity read after a step (acquisition or extension) for `ttl` that
 * began after `t0`, is what that step left: at most the TTL, and at least the TTL less the drift
 * (1 % + 2 ms), less the time since `t0` (measured here, after `v` was read), less a few ms of
 * rounding. A bound by measurement, not a guess of how slow a busy machine under valgrind is. */
static inline int fresh_validity(uint32_t v, uint32_t ttl, const struct timespec *t0) {
  long least = (long)ttl - (long)ttl / 100 - 2 - ms_since(t0) - 5;
  if (v > ttl || (long)v < least) fprintf(stderr, "validity %u ms of a %u ms TTL, want >= %ld\n", v, ttl, least);
  return v <= ttl && (long)v >= least;
}

static inline redlock_manager *make_manager(uint32_t retries, uint32_t delay_ms) {
  char err[256];
  redlock_config *cfg = redlock_config_new();
  CHECK(cfg != NULL);
  for (int i = 0; i < n_urls; i++) CHECK_STATUS(redlock_config_add_node(cfg, urls[i], err, sizeof err), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_config_set_retry(cfg, retries, delay_ms, err, sizeof err), REDLOCK_STATUS_OK);
  /* Generous timeouts: CI machines are small and busy, and this program also runs under
   * valgrind, which slows it many times over. No node here is ever down or stopped, so a
   * timeout only costs time when a node is slow to answer, and then waiting helps. */
  CHECK_STATUS(redlock_config_set_timeouts(cfg, 5000, 2000, err, sizeof err), REDLOCK_STATUS_OK);
  redlock_manager *mgr = NULL;
  redlock_status st = redlock_manager_new(cfg, &mgr, err, sizeof err);
  if (st != REDLOCK_STATUS_OK) fprintf(stderr, "manager: %s\n", err);
  CHECK(st == REDLOCK_STATUS_OK && mgr != NULL);
  redlock_config_free(cfg);
  return mgr;
}

/* An acquisition that waits in its own thread (test_wait's lock, test_semaphore's permit). */
struct waiter {
  redlock_manager *mgr;
  redlock_acquire_opts *opts;
  redlock_status status;
  redlock_lease *lease;
  struct timespec done;
};

/* Takes the nodes' URLs from the arguments; 0 (after a usage line) if there are none. */
static inline int harness_start(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s redis://127.0.0.1:PORT ...\n", argv[0]);
    return 0;
  }
  urls = (const char **)(argv + 1);
  n_urls = argc - 1;
  return 1;
}

/* Prints the count of checks and failures; the exit status: 0 only if every check passed. */
static inline int harness_finish(void) {
  printf("%d checks, %d failures\n", checks, failures);
  return failures == 0 ? 0 : 1;
}

#endif
