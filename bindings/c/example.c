/* The C quickstart: lock a resource across three Redis nodes, extend, unlock.
 *
 *   make -C bindings/c                  # builds the library (release) and this program
 *   bindings/c/build/example redis://127.0.0.1:7001 redis://127.0.0.1:7002 redis://127.0.0.1:7003
 *
 * Restart quarantine is on, as by default: nodes that were just started are a brand-new
 * cluster and count at once; a node that restarted or lost its data later does not count until
 * the maximum TTL (60 s by default) has passed.
 */
#include <stdio.h>
#include <string.h>

#include "redlock.h"

int main(int argc, char **argv) {
  char err[512];
  if (argc < 2) {
    fprintf(stderr, "usage: %s redis://host:port [redis://host:port ...]\n", argv[0]);
    return 2;
  }

  redlock_config *cfg = redlock_config_new();
  for (int i = 1; i < argc; i++) {
    if (redlock_config_add_node(cfg, argv[i], err, sizeof err) != REDLOCK_STATUS_OK) {
      fprintf(stderr, "bad node %s: %s\n", argv[i], err);
      redlock_config_free(cfg);
      return 1;
    }
  }
  redlock_config_set_retry(cfg, 3, 200, NULL, 0);

  redlock_manager *mgr = NULL;
  redlock_status st = redlock_manager_new(cfg, &mgr, err, sizeof err);
  redlock_config_free(cfg); /* the manager keeps its own copy */
  if (st != REDLOCK_STATUS_OK) {
    fprintf(stderr, "manager: %s\n", err);
    return 1;
  }

  const char *resource = "orders:42";
  redlock_lease *lease = NULL;
  st = redlock_lock(mgr, (const uint8_t *)resource, strlen(resource), 10000, &lease, err,
                    sizeof err);
  if (st != REDLOCK_STATUS_OK) {
    /* st: NOT_ACQUIRED (held elsewhere), UNAVAILABLE (too many nodes down), ...; err says
     * which already ("unavailable: 0/3 granted ..."), so it is printed alone. */
    fprintf(stderr, "lock: %s\n", err);
    redlock_manager_free(mgr);
    return 1;
  }
  printf("locked %s with token %s: %u ms of validity, %zu/%zu nodes granted\n", resource,
         redlock_lease_token(lease), redlock_lease_validity_ms(lease), redlock_lease_granted(lease),
         redlock_lease_node_count(lease));

  /* ... the critical section: finish within redlock_lease_validity_ms(lease) ... */

  st = redlock_extend(lease, 10000, err, sizeof err);
  if (st != REDLOCK_STATUS_OK) fprintf(stderr, "extend: %s\n", err);

  st = redlock_unlock(lease, err, sizeof err);
  if (st != REDLOCK_STATUS_OK) fprintf(stderr, "unlock: %s\n", err);
  else printf("unlocked\n");

  redlock_lease_free(lease);
  redlock_manager_free(mgr);
  return st == REDLOCK_STATUS_OK ? 0 : 1;
}
