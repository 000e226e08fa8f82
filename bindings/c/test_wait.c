/* Waiting for a lock: woken by a release, cancelled from another thread.
 * Tests of the C ABI against real redis-server nodes whose URLs are given as arguments;
 * `cargo test --test c_api` starts three nodes and runs this program, plain and under
 * valgrind. The checks and helpers are harness.h's. */
#include "harness.h"

static const uint8_t WAITED[] = "c-waited";

static void *wait_for_lock(void *arg) {
  struct waiter *w = arg;
  char err[512];
  w->status = redlock_acquire(w->mgr, WAITED, sizeof WAITED - 1, 30000, w->opts, &w->lease, err, sizeof err);
  clock_gettime(CLOCK_MONOTONIC, &w->done);
  return NULL;
}

/* Waiting by notification and cancellation from another thread. The waiter's retry delay is
 * 30 s, so a waiter that gets the lock within 3 s of the release was woken, not polling (a
 * poller's pause is random, under 3 s one time in ten). The bounds are fractions of what
 * the alternative would take, not milliseconds: this runs under valgrind on busy machines
 * too. The figures are printed. */
static void test_wait_and_cancel(void) {
  char err[512];
  redlock_manager *holder = make_manager(0, 5000);
  redlock_manager *mgr = make_manager(0, 30000);
  redlock_lease *held = NULL;
  CHECK_STATUS(redlock_try_lock(holder, WAITED, sizeof WAITED - 1, 30000, &held, err, sizeof err), REDLOCK_STATUS_OK);

  /* Cancelled mid-wait from another thread: CANCELLED at once, nothing left behind. */
  redlock_cancel *cancel = redlock_cancel_new();
  CHECK(cancel != NULL);
  CHECK(!redlock_cancel_is_fired(cancel));
  redlock_acquire_opts *opts = redlock_acquire_opts_new();
  CHECK_STATUS(redlock_acquire_opts_set_wait_ms(opts, 20000), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_acquire_opts_set_cancel(opts, cancel), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_acquire_opts_set_cancel(NULL, cancel), REDLOCK_STATUS_NULL_ARGUMENT);
  struct waiter w = {mgr, opts, REDLOCK_STATUS_OK, NULL, {0, 0}};
  pthread_t t;
  CHECK(pthread_create(&t, NULL, wait_for_lock, &w) == 0);
  sleep_ms(300);
  struct timespec fired;
  clock_gettime(CLOCK_MONOTONIC, &fired);
  redlock_cancel_fire(cancel);
  redlock_cancel_fire(cancel); /* idempotent */
  pthread_join(t, NULL);
  long took = (w.done.tv_sec - fired.tv_sec) * 1000 + (w.done.tv_nsec - fired.tv_nsec) / 1000000;
  printf("cancelled wait returned %ld ms after fire\n", took);
  CHECK_STATUS(w.status, REDLOCK_STATUS_CANCELLED);
  CHECK(w.lease == NULL);
  CHECK(took < 5000); /* at once: without the cancel the wait lasts 20 s */
  CHECK(redlock_cancel_is_fired(cancel));
  /* The options keep the handle alive: freeing it first is safe. */
  redlock_cancel_free(cancel);
  redlock_cancel_free(NULL);
  redlock_cancel_fire(NULL);
  CHECK(!redlock_cancel_is_fired(NULL));
  /* A fired handle: CANCELLED again, without waiting. */
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  redlock_lease *none = NULL;
  CHECK_STATUS(redlock_acquire(mgr, WAITED, sizeof WAITED - 1, 30000, opts, &none, err, sizeof err), REDLOCK_STATUS_CANCELLED);
  CHECK(strstr(err, "cancelled") != NULL);
  CHECK(ms_since(&t0) < 5000); /* without waiting: the lock is held for 30 s */

  /* Woken by the release: a new wait, without a cancel handle. */
  CHECK_STATUS(redlock_acquire_opts_set_cancel(opts, NULL), REDLOCK_STATUS_OK);
  w.lease = NULL;
  CHECK(pthread_create(&t, NULL, wait_for_lock, &w) == 0);
  sleep_ms(300);
  struct timespec released;
  clock_gettime(CLOCK_MONOTONIC, &released);
  CHECK_STATUS(redlock_unlock(held, err, sizeof err), REDLOCK_STATUS_OK);
  redlock_lease_free(held);
  pthread_join(t, NULL);
  long gap = (w.done.tv_sec - released.tv_sec) * 1000 + (w.done.tv_nsec - released.tv_nsec) / 1000000;
  printf("woken waiter granted %ld ms after the release\n", gap);
  CHECK_STATUS(w.status, REDLOCK_STATUS_OK);
  CHECK(gap < 3000);
  if (w.lease) {
    CHECK_STATUS(redlock_unlock(w.lease, err, sizeof err), REDLOCK_STATUS_OK);
    redlock_lease_free(w.lease);
  }
  /* Nothing of the cancelled waiter was left: the resource is free. */
  CHECK_STATUS(redlock_try_lock(holder, WAITED, sizeof WAITED - 1, 1000, &held, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_unlock(held, err, sizeof err), REDLOCK_STATUS_OK);
  redlock_lease_free(held);
  CHECK_STATUS(redlock_acquire_opts_set_notify(opts, false), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_acquire_opts_set_notify(NULL, false), REDLOCK_STATUS_NULL_ARGUMENT);
  redlock_acquire_opts_free(opts);
  redlock_manager_free(mgr);
  redlock_manager_free(holder);
}

int main(int argc, char **argv) {
  if (!harness_start(argc, argv)) return 2;
  test_wait_and_cancel();
  return harness_finish();
}
