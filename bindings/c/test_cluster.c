/* Cluster nodes (redis+cluster://) through the C ABI, against real redis-server processes in
 * cluster mode:
 *
 *   test_cluster CLUSTER_URL CLUSTER_URL CLUSTER_URL
 *
 * Each URL names one Redis Cluster, one node of the quorum. `cargo test --test c_api` starts
 * them and runs this program, plain and under valgrind --leak-check=full --error-exitcode=1.
 * Exit status 0 only if every check passed. */
#include "harness.h"

/* A manager over the clusters, restart quarantine on or off. */
static redlock_status cluster_manager(int quarantine, redlock_manager **mgr, char *err, size_t err_len) {
  redlock_config *cfg = redlock_config_new();
  for (int i = 0; i < n_urls; i++) CHECK_STATUS(redlock_config_add_node(cfg, urls[i], err, err_len), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_config_set_timeouts(cfg, 5000, 2000, err, err_len), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_config_set_retry(cfg, 3, 50, err, err_len), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_config_set_restart_quarantine(cfg, quarantine, err, err_len), REDLOCK_STATUS_OK);
  redlock_status st = redlock_manager_new(cfg, mgr, err, err_len);
  redlock_config_free(cfg);
  return st;
}

static void test_urls(void) {
  char err[512];
  redlock_config *cfg = redlock_config_new();
  CHECK_STATUS(redlock_config_add_node(cfg, "redis+cluster://127.0.0.1:7000,127.0.0.1:7001", err, sizeof err),
               REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_config_add_node(cfg, "redis+cluster://127.0.0.1:7002/1", err, sizeof err),
               REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK(strstr(err, "database 0 only") != NULL);
  redlock_config_free(cfg);
}

/* Restart quarantine on (per shard), as by default. */
static void test_lock_on_clusters(void) {
  char err[1024];
  redlock_manager *mgr = NULL;
  redlock_status st = cluster_manager(1, &mgr, err, sizeof err);
  if (st != REDLOCK_STATUS_OK) fprintf(stderr, "manager: %s\n", err);
  CHECK(st == REDLOCK_STATUS_OK && mgr != NULL);
  if (!mgr) return;
  const char *res = "c:cluster:lock";
  redlock_lease *lease = NULL;
  st = redlock_try_lock(mgr, (const uint8_t *)res, strlen(res), 10000, &lease, err, sizeof err);
  if (st != REDLOCK_STATUS_OK) fprintf(stderr, "try_lock: %s\n", err);
  CHECK(st == REDLOCK_STATUS_OK && lease != NULL);
  if (lease) {
    /* Granted at quorum: the last cluster may still be pending. */
    enum redlock_node_outcome o[3];
    CHECK(redlock_lease_node_outcomes(lease, o, 3) == 3);
    int granted = 0;
    for (int i = 0; i < 3; i++) {
      granted += o[i] == REDLOCK_NODE_SUCCESS;
      CHECK(o[i] == REDLOCK_NODE_SUCCESS || o[i] == REDLOCK_NODE_PENDING);
    }
    CHECK(granted >= 2);
    /* Held: a second attempt is refused. */
    redlock_lease *other = NULL;
    CHECK_STATUS(redlock_try_lock(mgr, (const uint8_t *)res, strlen(res), 10000, &other, err, sizeof err),
                 REDLOCK_STATUS_NOT_ACQUIRED);
    CHECK_STATUS(redlock_extend(lease, 20000, err, sizeof err), REDLOCK_STATUS_OK);
    CHECK_STATUS(redlock_unlock(lease, err, sizeof err), REDLOCK_STATUS_OK);
    redlock_lease_free(lease);
  }
  /* A reentrant lock: its hash and fencing counter share the key's slot. */
  redlock_acquire_opts *opts = redlock_acquire_opts_new();
  CHECK_STATUS(redlock_acquire_opts_set_owner(opts, (const uint8_t *)"me", 2), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_acquire_opts_set_fenced(opts, true), REDLOCK_STATUS_OK);
  lease = NULL;
  st = redlock_acquire(mgr, (const uint8_t *)res, strlen(res), 10000, opts, &lease, err, sizeof err);
  if (st != REDLOCK_STATUS_OK) fprintf(stderr, "acquire (reentrant): %s\n", err);
  CHECK(st == REDLOCK_STATUS_OK && lease != NULL);
  if (lease) {
    CHECK_STATUS(redlock_unlock(lease, err, sizeof err), REDLOCK_STATUS_OK);
    redlock_lease_free(lease);
  }
  /* Several resources in different slots: one script per slot on each cluster, all or none. */
  const uint8_t *many[2] = {(const uint8_t *)"x", (const uint8_t *)"y"};
  size_t lens[2] = {1, 1};
  lease = NULL;
  st = redlock_acquire_many(mgr, many, lens, 2, 10000, NULL, &lease, err, sizeof err);
  if (st != REDLOCK_STATUS_OK) fprintf(stderr, "acquire_many: %s\n", err);
  CHECK(st == REDLOCK_STATUS_OK && lease != NULL);
  if (lease) {
    /* Held: each resource alone is refused. */
    redlock_lease *one = NULL;
    CHECK_STATUS(redlock_try_lock(mgr, many[1], 1, 10000, &one, err, sizeof err), REDLOCK_STATUS_NOT_ACQUIRED);
    CHECK_STATUS(redlock_extend(lease, 20000, err, sizeof err), REDLOCK_STATUS_OK);
    CHECK_STATUS(redlock_unlock(lease, err, sizeof err), REDLOCK_STATUS_OK);
    redlock_lease_free(lease);
  }
  redlock_acquire_opts_free(opts);
  redlock_manager_free(mgr);
}

int main(int argc, char **argv) {
  if (!harness_start(argc, argv)) return 2;
  test_urls();
  test_lock_on_clusters();
  return harness_finish();
}
