/* Failover groups (redis+sentinel://) through the C ABI, against a real redis-server master
 * watched by real sentinels:
 *
 *   test_sentinel GROUP_URL AUTH_GROUP_URL SENTINEL_PASSWORD
 *
 * GROUP_URL names a sentinel without a password, AUTH_GROUP_URL one with `requirepass
 * SENTINEL_PASSWORD`, both watching the same master. `cargo test --test c_api` starts them and
 * runs this program, plain and under valgrind --leak-check=full --error-exitcode=1. Exit
 * status 0 only if every check passed. */
#include "harness.h"

static const char *group, *auth_group, *password;

/* A manager over one node, `url`, with the sentinels' password if `pw` is not NULL. */
static redlock_manager *group_manager(const char *url, const char *pw) {
  char err[512];
  redlock_config *cfg = redlock_config_new();
  CHECK_STATUS(redlock_config_add_node(cfg, url, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_config_set_timeouts(cfg, 5000, 2000, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_config_set_retry(cfg, 0, 10, err, sizeof err), REDLOCK_STATUS_OK);
  if (pw) CHECK_STATUS(redlock_config_set_sentinel_auth(cfg, NULL, pw, err, sizeof err), REDLOCK_STATUS_OK);
  redlock_manager *mgr = NULL;
  redlock_status st = redlock_manager_new(cfg, &mgr, err, sizeof err);
  if (st != REDLOCK_STATUS_OK) fprintf(stderr, "manager: %s\n", err);
  CHECK(st == REDLOCK_STATUS_OK && mgr != NULL);
  redlock_config_free(cfg);
  return mgr;
}

static void test_setters(void) {
  char err[512];
  redlock_config *cfg = redlock_config_new();
  CHECK_STATUS(redlock_config_set_sentinel_auth(NULL, NULL, "pw", err, sizeof err), REDLOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(redlock_config_set_sentinel_auth(cfg, NULL, NULL, err, sizeof err), REDLOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(redlock_config_set_sentinel_auth(cfg, NULL, "", err, sizeof err), REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK(strstr(err, "password") != NULL);
  CHECK_STATUS(redlock_config_set_sentinel_auth(cfg, "", "pw", err, sizeof err), REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(redlock_config_set_sentinel_auth(cfg, "alice", "pw", err, sizeof err), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_config_set_replica_acks(cfg, 0, 100, err, sizeof err), REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(redlock_config_set_replica_acks(cfg, 1, 0, err, sizeof err), REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(redlock_config_set_replica_acks(cfg, 1, 100, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_config_add_node(cfg, "redis+sentinel://127.0.0.1,127.0.0.2:5000/svc/2", err, sizeof err),
               REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_config_add_node(cfg, "redis+sentinel://127.0.0.1:26379", err, sizeof err),
               REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK(strstr(err, "SERVICE") != NULL);
  CHECK_STATUS(redlock_config_add_node(cfg, "redis://127.0.0.1:7000?durable=true", err, sizeof err), REDLOCK_STATUS_OK);
  redlock_config_free(cfg);
  CHECK(REDLOCK_NODE_SENTINEL == 11 && REDLOCK_NODE_UNACKNOWLEDGED == 12);
  CHECK(REDLOCK_QUARANTINE_PROMOTED == 6);
}

static void test_lock_through_a_group(void) {
  char err[512];
  redlock_manager *mgr = group_manager(group, NULL);
  const char *res = "c:sentinel:lock";
  redlock_lease *lease = NULL;
  redlock_status st = redlock_try_lock(mgr, (const uint8_t *)res, strlen(res), 10000, &lease, err, sizeof err);
  if (st != REDLOCK_STATUS_OK) fprintf(stderr, "try_lock: %s\n", err);
  CHECK(st == REDLOCK_STATUS_OK && lease != NULL);
  if (lease) {
    enum redlock_node_outcome o[1];
    CHECK(redlock_lease_node_outcomes(lease, o, 1) == 1 && o[0] == REDLOCK_NODE_SUCCESS);
    CHECK_STATUS(redlock_unlock(lease, err, sizeof err), REDLOCK_STATUS_OK);
    redlock_lease_free(lease);
  }
  redlock_manager_free(mgr);
}

static void test_sentinel_credentials(void) {
  char err[1024];
  const char *res = "c:sentinel:auth";
  /* Without the sentinels' password: the group cannot be found, and the error says why. */
  redlock_manager *mgr = group_manager(auth_group, NULL);
  redlock_lease *lease = (redlock_lease *)0x1;
  CHECK_STATUS(redlock_try_lock(mgr, (const uint8_t *)res, strlen(res), 10000, &lease, err, sizeof err),
               REDLOCK_STATUS_UNAVAILABLE);
  CHECK(lease == (redlock_lease *)0x1);
  CHECK(strstr(err, "failover group") != NULL && strstr(err, "NOAUTH") != NULL);
  redlock_manager_free(mgr);
  /* With it: granted. */
  mgr = group_manager(auth_group, password);
  lease = NULL;
  redlock_status st = redlock_try_lock(mgr, (const uint8_t *)res, strlen(res), 10000, &lease, err, sizeof err);
  if (st != REDLOCK_STATUS_OK) fprintf(stderr, "try_lock with the sentinel password: %s\n", err);
  CHECK(st == REDLOCK_STATUS_OK && lease != NULL);
  if (lease) {
    CHECK_STATUS(redlock_unlock(lease, err, sizeof err), REDLOCK_STATUS_OK);
    redlock_lease_free(lease);
  }
  redlock_manager_free(mgr);
}

int main(int argc, char **argv) {
  if (!harness_start(argc, argv) || n_urls != 3) {
    fprintf(stderr, "usage: %s GROUP_URL AUTH_GROUP_URL SENTINEL_PASSWORD\n", argv[0]);
    return 2;
  }
  group = urls[0];
  auth_group = urls[1];
  password = urls[2];
  test_setters();
  test_lock_through_a_group();
  test_sentinel_credentials();
  return harness_finish();
}
