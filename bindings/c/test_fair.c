/* The fair lock: waiters granted in queue order.
 * Tests of the C ABI against real redis-server nodes whose URLs are given as arguments;
 * `cargo test --test c_api` starts three nodes and runs this program, plain and under
 * valgrind. The checks and helpers are harness.h's. */
#include <netdb.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "harness.h"

/* HLEN of `key` on the node at `url` ("redis://host:port" or "host:port"), over a connection
 * of its own that bypasses the library; -1 on any failure. */
static long long node_hlen(const char *url, const char *key) {
  const char *hp = strstr(url, "://");
  hp = hp ? hp + 3 : url;
  const char *colon = strrchr(hp, ':');
  if (!colon) return -1;
  char host[64], port[16];
  size_t hl = (size_t)(colon - hp);
  if (hl == 0 || hl >= sizeof host) return -1;
  memcpy(host, hp, hl);
  host[hl] = '\0';
  snprintf(port, sizeof port, "%.*s", (int)strcspn(colon + 1, "/"), colon + 1);
  struct addrinfo hints, *ai = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(host, port, &hints, &ai) != 0 || !ai) return -1;
  long long n = -1;
  int fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
  if (fd >= 0) {
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
      char cmd[256], reply[64];
      int len = snprintf(cmd, sizeof cmd, "*2\r\n$4\r\nHLEN\r\n$%zu\r\n%s\r\n", strlen(key), key);
      size_t got = 0;
      if (len > 0 && (size_t)len < sizeof cmd && send(fd, cmd, (size_t)len, 0) == len) {
        /* The reply is one line, ":<n>\r\n". */
        while (got < sizeof reply - 1) {
          ssize_t r = recv(fd, reply + got, sizeof reply - 1 - got, 0);
          if (r <= 0) break;
          got += (size_t)r;
          if (got >= 2 && reply[got - 2] == '\r' && reply[got - 1] == '\n') break;
        }
        reply[got] = '\0';
        if (got >= 4 && reply[0] == ':') n = strtoll(reply + 1, NULL, 10);
      }
    }
    close(fd);
  }
  freeaddrinfo(ai);
  return n;
}

/* On how many nodes the queue `key` holds at least `n` waiters. */
static int nodes_queued(const char *key, long long n) {
  int on = 0;
  for (int i = 0; i < n_urls; i++)
    if (node_hlen(urls[i], key) >= n) on++;
  return on;
}

/* Waits (at most 20 s) until at least `n` waiters are queued on a majority of the nodes: the
 * last of them has finished queueing, so whoever queues next gets a larger ticket. */
static int wait_queued(const char *key, long long n) {
  for (int i = 0; i < 2000; i++) {
    if (nodes_queued(key, n) >= n_urls / 2 + 1) return 1;
    sleep_ms(10);
  }
  return 0;
}

/* Waits (at most 10 s) until no node has the queue `key` (every entry left with its waiter). */
static int wait_queue_gone(const char *key) {
  for (int i = 0; i < 1000; i++) {
    int left = 0;
    for (int j = 0; j < n_urls; j++)
      if (node_hlen(urls[j], key) != 0) left++;
    if (left == 0) return 1;
    sleep_ms(10);
  }
  return 0;
}

static const uint8_t FAIR[] = "c-fair";
static const char FAIR_QUEUE[] = "redlock-fair:redlock:c-fair";

struct fair_waiter {
  redlock_manager *mgr;
  const redlock_acquire_opts *opts;
  int *next; /* the grant counter the waiters share */
  redlock_status status;
  int order; /* the how-manyth grant this waiter's was, from 0; -1 if none */
  bool has_ticket;
  uint64_t ticket;
  volatile int finished;
  struct timespec granted;
};

/* A fair waiter: waits for the lock, records the order of its grant and its ticket, holds the
 * lock briefly and releases it, which wakes the next waiter. */
static void *fair_wait(void *arg) {
  struct fair_waiter *w = arg;
  char err[512];
  redlock_lease *lease = NULL;
  w->status = redlock_acquire(w->mgr, FAIR, sizeof FAIR - 1, 10000, w->opts, &lease, err, sizeof err);
  if (w->status == REDLOCK_STATUS_OK) {
    clock_gettime(CLOCK_MONOTONIC, &w->granted);
    w->order = __atomic_fetch_add(w->next, 1, __ATOMIC_SEQ_CST);
    w->has_ticket = redlock_lease_ticket(lease, &w->ticket);
    sleep_ms(5);
    redlock_status st = redlock_unlock(lease, err, sizeof err);
    if (st != REDLOCK_STATUS_OK) {
      fprintf(stderr, "fair waiter unlock: %s\n", err);
      w->status = st;
    }
    redlock_lease_free(lease);
  } else {
    fprintf(stderr, "fair waiter: %s\n", err);
  }
  __atomic_store_n(&w->finished, 1, __ATOMIC_SEQ_CST);
  return NULL;
}

/* test_fair's first steps: nobody queued, granted at once with no ticket; a waiter that
 * gives up leaves the queue. The holder, still holding; NULL if not granted (the test stops). */
static redlock_lease *fair_first(redlock_manager *mgr, redlock_acquire_opts *once) {
  char err[512];
  /* Nobody queued: granted at once, with no ticket. */
  redlock_lease *holder = NULL;
  /* 60 s (the maximum): it must outlast the queueing below, slow under valgrind. */
  CHECK_STATUS(redlock_acquire(mgr, FAIR, sizeof FAIR - 1, 60000, once, &holder, err, sizeof err), REDLOCK_STATUS_OK);
  if (!holder) return NULL;
  uint64_t ticket = 77;
  CHECK(!redlock_lease_ticket(holder, &ticket) && ticket == 77);
  CHECK(!redlock_lease_ticket(holder, NULL));
  CHECK(redlock_lease_is_valid(holder));
  /* Held: a plain try and a fair try are refused, and the fair try queues nothing. */
  redlock_lease *other = (redlock_lease *)0x1;
  CHECK_STATUS(redlock_try_lock(mgr, FAIR, sizeof FAIR - 1, 1000, &other, err, sizeof err), REDLOCK_STATUS_NOT_ACQUIRED);
  CHECK_STATUS(redlock_acquire(mgr, FAIR, sizeof FAIR - 1, 1000, once, &other, err, sizeof err), REDLOCK_STATUS_NOT_ACQUIRED);
  CHECK(other == (redlock_lease *)0x1);
  CHECK(nodes_queued(FAIR_QUEUE, 1) == 0);

  /* A waiter that gives up (its wait runs out) leaves the queue. */
  redlock_acquire_opts *short_wait = redlock_acquire_opts_new();
  CHECK_STATUS(redlock_acquire_opts_set_fair(short_wait, true), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_acquire_opts_set_wait_ms(short_wait, 300), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_acquire(mgr, FAIR, sizeof FAIR - 1, 1000, short_wait, &other, err, sizeof err), REDLOCK_STATUS_NOT_ACQUIRED);
  CHECK(other == (redlock_lease *)0x1);
  CHECK(wait_queue_gone(FAIR_QUEUE));
  redlock_acquire_opts_free(short_wait);
  return holder;
}

/* test_fair's waiters, granted in queue order once `holder` releases (freed here). */
static void fair_in_order(redlock_manager *mgr, const redlock_acquire_opts *waits, redlock_lease *holder) {
  char err[512];
  /* Waiters queued one after another (each started once the one before has queued on a
   * majority) are granted in that order once the holder releases, each with a ticket larger
   * than the one before's. */
  enum { WAITERS = 4 };
  int next = 0;
  struct fair_waiter w[WAITERS];
  pthread_t t[WAITERS];
  int started = 0;
  for (int i = 0; i < WAITERS; i++) {
    w[i] = (struct fair_waiter){mgr, waits, &next, REDLOCK_STATUS_INTERNAL, -1, false, 0, 0, {0, 0}};
    if (pthread_create(&t[i], NULL, fair_wait, &w[i]) != 0) break;
    started++;
    int queued = wait_queued(FAIR_QUEUE, i + 1);
    if (!queued) fprintf(stderr, "fair waiter %d never queued on a majority\n", i);
    CHECK(queued);
  }
  CHECK(started == WAITERS);
  for (int i = 0; i < started; i++) CHECK(!__atomic_load_n(&w[i].finished, __ATOMIC_SEQ_CST));
  struct timespec released;
  clock_gettime(CLOCK_MONOTONIC, &released);
  CHECK_STATUS(redlock_unlock(holder, err, sizeof err), REDLOCK_STATUS_OK);
  redlock_lease_free(holder);
  for (int i = 0; i < started; i++) pthread_join(t[i], NULL);
  long last = 0;
  for (int i = 0; i < started; i++) {
    CHECK_STATUS(w[i].status, REDLOCK_STATUS_OK);
    if (w[i].order != i) fprintf(stderr, "fair waiter %d was granted the lock %d-th\n", i, w[i].order);
    CHECK(w[i].order == i);
    CHECK(w[i].has_ticket);
    if (i > 0) CHECK(w[i].ticket > w[i - 1].ticket);
    long at = (w[i].granted.tv_sec - released.tv_sec) * 1000 + (w[i].granted.tv_nsec - released.tv_nsec) / 1000000;
    if (at > last) last = at;
  }
  printf("%d fair waiters granted in queue order, the last %ld ms after the release\n", started, last);
  /* Each was woken by the release before it: without the wake-ups, each would wait for its
   * next refresh (12 s). */
  CHECK(last < 10000);
  /* Every entry left the queues with its waiter. */
  CHECK(wait_queue_gone(FAIR_QUEUE));
}

/* test_fair's fenced fair lock, and a plain lease without a ticket. */
static void fair_tickets(redlock_manager *mgr) {
  char err[512];
  uint64_t ticket = 77; /* what a failed redlock_lease_ticket leaves */
  /* A fair lock with a fencing token; a plain lease has no ticket. */
  redlock_acquire_opts *fenced = redlock_acquire_opts_new();
  CHECK_STATUS(redlock_acquire_opts_set_fair(fenced, true), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_acquire_opts_set_fenced(fenced, true), REDLOCK_STATUS_OK);
  redlock_lease *lease = NULL;
  CHECK_STATUS(redlock_acquire(mgr, FAIR, sizeof FAIR - 1, 10000, fenced, &lease, err, sizeof err), REDLOCK_STATUS_OK);
  if (lease) {
    CHECK(redlock_lease_fencing_token(lease) > 0);
    CHECK(!redlock_lease_ticket(lease, &ticket) && ticket == 77);
    CHECK_STATUS(redlock_unlock(lease, err, sizeof err), REDLOCK_STATUS_OK);
    redlock_lease_free(lease);
  }
  redlock_acquire_opts_free(fenced);
  lease = NULL;
  CHECK_STATUS(redlock_try_lock(mgr, FAIR, sizeof FAIR - 1, 10000, &lease, err, sizeof err), REDLOCK_STATUS_OK);
  if (lease) {
    CHECK(!redlock_lease_ticket(lease, &ticket) && ticket == 77);
    CHECK_STATUS(redlock_unlock(lease, err, sizeof err), REDLOCK_STATUS_OK);
    redlock_lease_free(lease);
  }
}

/* test_fair's bad input, the setters. The refused options, left as they were: the caller
 * frees them. */
static redlock_acquire_opts *fair_bad_setters(redlock_manager *mgr) {
  char err[512];
  uint64_t ticket = 77; /* what a failed redlock_lease_ticket leaves */
  redlock_lease *other, *lease;
  /* Bad input. The setters: NULL options, an invalid handle, a drop-out time out of range
   * (the options unchanged). */
  static uint64_t zeros[512]; /* a forged handle, as in test_invalid_handles */
  CHECK_STATUS(redlock_acquire_opts_set_fair(NULL, true), REDLOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(redlock_acquire_opts_set_drop_out_ms(NULL, 1000), REDLOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(redlock_acquire_opts_set_fair((redlock_acquire_opts *)zeros, true), REDLOCK_STATUS_INVALID_HANDLE);
  CHECK_STATUS(redlock_acquire_opts_set_drop_out_ms((redlock_acquire_opts *)zeros, 1000), REDLOCK_STATUS_INVALID_HANDLE);
  CHECK(!redlock_lease_ticket((const redlock_lease *)zeros, &ticket) && ticket == 77);
  CHECK(!redlock_lease_ticket(NULL, &ticket) && ticket == 77);
  CHECK(!redlock_lease_ticket(NULL, NULL));
  redlock_acquire_opts *bad = redlock_acquire_opts_new();
  CHECK_STATUS(redlock_acquire_opts_set_drop_out_ms(bad, REDLOCK_MIN_DROP_OUT_MS - 1), REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(redlock_acquire_opts_set_drop_out_ms(bad, 1), REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(redlock_acquire_opts_set_drop_out_ms(bad, REDLOCK_MAX_DROP_OUT_MS + 1), REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(redlock_acquire_opts_set_drop_out_ms(bad, UINT32_MAX), REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK(REDLOCK_MIN_DROP_OUT_MS <= REDLOCK_DEFAULT_DROP_OUT_MS && REDLOCK_DEFAULT_DROP_OUT_MS <= REDLOCK_MAX_DROP_OUT_MS);
  /* Refused settings left the options as they were: a plain lock is granted. */
  lease = NULL;
  CHECK_STATUS(redlock_acquire(mgr, FAIR, sizeof FAIR - 1, 1000, bad, &lease, err, sizeof err), REDLOCK_STATUS_OK);
  if (lease) {
    CHECK(!redlock_lease_ticket(lease, NULL));
    CHECK_STATUS(redlock_unlock(lease, err, sizeof err), REDLOCK_STATUS_OK);
    redlock_lease_free(lease);
  }
  /* A drop-out time without fair: refused at the acquisition, nothing sent, *out untouched. */
  CHECK_STATUS(redlock_acquire_opts_set_drop_out_ms(bad, REDLOCK_MIN_DROP_OUT_MS), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_acquire_opts_set_drop_out_ms(bad, REDLOCK_MAX_DROP_OUT_MS), REDLOCK_STATUS_OK);
  other = (redlock_lease *)0x1;
  err[0] = '\0';
  CHECK_STATUS(redlock_acquire(mgr, FAIR, sizeof FAIR - 1, 1000, bad, &other, err, sizeof err), REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK(strstr(err, "drop-out") != NULL && strstr(err, "fair") != NULL);
  CHECK(other == (redlock_lease *)0x1);
  /* 0 is the default again: a plain lock is granted. */
  CHECK_STATUS(redlock_acquire_opts_set_drop_out_ms(bad, 0), REDLOCK_STATUS_OK);
  lease = NULL;
  CHECK_STATUS(redlock_acquire(mgr, FAIR, sizeof FAIR - 1, 1000, bad, &lease, err, sizeof err), REDLOCK_STATUS_OK);
  if (lease) {
    CHECK_STATUS(redlock_unlock(lease, err, sizeof err), REDLOCK_STATUS_OK);
    redlock_lease_free(lease);
  }
  return bad;
}

/* test_fair's bad input, the combinations refused at the acquisition (with `bad`). */
static void fair_bad_combinations(redlock_manager *mgr, redlock_acquire_opts *bad) {
  char err[512];
  redlock_lease *other = (redlock_lease *)0x1; /* what the refusals before left */
  redlock_lease *lease;
  /* Fair with an owner, or shared: refused at the acquisition. */
  CHECK_STATUS(redlock_acquire_opts_set_fair(bad, true), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_acquire_opts_set_owner(bad, (const uint8_t *)"job-1", 5), REDLOCK_STATUS_OK);
  err[0] = '\0';
  CHECK_STATUS(redlock_acquire(mgr, FAIR, sizeof FAIR - 1, 1000, bad, &other, err, sizeof err), REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK(strstr(err, "fair") != NULL && strstr(err, "reentrant") != NULL);
  CHECK_STATUS(redlock_acquire_opts_set_owner(bad, NULL, 0), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_acquire_opts_set_shared(bad, true), REDLOCK_STATUS_OK);
  err[0] = '\0';
  CHECK_STATUS(redlock_acquire(mgr, FAIR, sizeof FAIR - 1, 1000, bad, &other, err, sizeof err), REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK(strstr(err, "fair") != NULL && strstr(err, "shared") != NULL);
  CHECK_STATUS(redlock_acquire_opts_set_shared(bad, false), REDLOCK_STATUS_OK);
  /* Fair for a set or a semaphore's permit: refused. */
  const uint8_t *set[] = {(const uint8_t *)"c-fair-a", (const uint8_t *)"c-fair-b"};
  size_t set_lens[] = {8, 8};
  err[0] = '\0';
  CHECK_STATUS(redlock_acquire_many(mgr, set, set_lens, 2, 1000, bad, &other, err, sizeof err), REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK(strstr(err, "fair") != NULL);
  err[0] = '\0';
  CHECK_STATUS(redlock_semaphore_acquire(mgr, FAIR, sizeof FAIR - 1, 2, 1000, bad, &other, err, sizeof err), REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK(strstr(err, "fair") != NULL);
  CHECK(other == (redlock_lease *)0x1);
  /* Fair and valid again: granted (nothing was left by the refusals), no ticket. */
  lease = NULL;
  CHECK_STATUS(redlock_acquire(mgr, FAIR, sizeof FAIR - 1, 1000, bad, &lease, err, sizeof err), REDLOCK_STATUS_OK);
  if (lease) {
    CHECK(!redlock_lease_ticket(lease, NULL));
    CHECK_STATUS(redlock_unlock(lease, err, sizeof err), REDLOCK_STATUS_OK);
    redlock_lease_free(lease);
  }
  CHECK(nodes_queued(FAIR_QUEUE, 1) == 0);
}

/* The fair lock: granted at once without a ticket when nobody is queued; waiters queued one
 * after another granted in queue order, each with a larger ticket, a release waking the next;
 * a waiter that gives up leaving the queue; bad input refused. */
static void test_fair(void) {
  /* Retry delay 5 s, drop-out time 60 s (a waiter refreshes its place every 12 s): a waiter
   * granted within seconds of a release was woken by it. */
  redlock_manager *mgr = make_manager(0, 5000);
  redlock_acquire_opts *once = redlock_acquire_opts_new();
  redlock_acquire_opts *waits = redlock_acquire_opts_new();
  CHECK_STATUS(redlock_acquire_opts_set_fair(once, true), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_acquire_opts_set_wait_ms(once, 0), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_acquire_opts_set_fair(waits, true), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_acquire_opts_set_wait_ms(waits, 120000), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_acquire_opts_set_drop_out_ms(waits, 60000), REDLOCK_STATUS_OK);

  redlock_lease *holder = fair_first(mgr, once);
  if (!holder) return;
  fair_in_order(mgr, waits, holder);
  fair_tickets(mgr);
  redlock_acquire_opts *bad = fair_bad_setters(mgr);
  fair_bad_combinations(mgr, bad);
  redlock_acquire_opts_free(bad);
  redlock_acquire_opts_free(waits);
  redlock_acquire_opts_free(once);
  redlock_manager_free(mgr);
}

int main(int argc, char **argv) {
  if (!harness_start(argc, argv)) return 2;
  test_fair();
  return harness_finish();
}
