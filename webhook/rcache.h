/*
 * rcache.h - answers to AdmissionReviews the webhook has already answered,
 * reused when the same request comes again for another replica.
 *
 * A ReplicaSet creates every replica from one template, and the API server
 * sends the webhook one review per replica. Two things differ between them:
 * `request.uid`, and the name of the service-account token volume that the
 * API server's own ServiceAccount admission plugin adds before webhooks run
 * ("kube-api-access-" and five generated characters, in spec.volumes and in
 * every container's volumeMounts). The pod's name is still empty then (it is
 * generated after admission). Scaling a Deployment to 200 replicas asks the
 * same question 200 times.
 *
 * The cache keeps, for a few recent requests, the request's bytes and the
 * answer, with those places marked. A request that matches byte for byte
 * everywhere else, and whose token name has the same generated form, gets the
 * stored answer with its own uid put in. It is exactly the answer a review
 * would give: the answer depends on the uid only by echoing it, and on the
 * token volume's name not at all, which is checked rather than assumed: an
 * answer whose patch or warnings mention that name is not kept (the injector
 * only compares other volumes' names with its own, which start "diagport-").
 * The rest of the key is the path's two flags; the server clears the cache
 * when the configuration is reloaded.
 *
 * A new uid is taken only when it is a plain literal (letters, digits and
 * "-_.:" between quotes, as the API server's UUIDs are); anything else is a
 * miss and gets a full review. Thread-safe (a reader-writer lock: lookups
 * share it). Bounded: RCACHE_ENTRIES requests of at most RCACHE_MAX_BODY
 * bytes each.
 */
#ifndef DP_RCACHE_H
#define DP_RCACHE_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"

#define RCACHE_ENTRIES 32
#define RCACHE_MAX_BODY ((size_t)256 << 10)

struct rcache;

struct rcache *rcache_new(void); /* new, empty */
void rcache_free(struct rcache *c); /* accepts NULL */
void rcache_clear(struct rcache *c); /* forget everything (the configuration changed) */

/*
 * Look up body[0..len) under key. On a hit, append the stored answer with
 * this request's uid literal in its hole to out, set *tag to what was stored
 * with it, and return 1; else 0 (out untouched). Safe with c NULL (a miss).
 */
int rcache_get(struct rcache *c, unsigned key, const char *body, size_t len, struct buf *out, int *tag);

/*
 * Remember the answer ans[0..ans_len) to body[0..len) under key. The uid
 * literal, quotes included, is body[hole..hole+hole_len) and
 * ans[ans_hole..ans_hole+ans_hole_len). names_free: the answer's patch and
 * warnings do not contain "kube-api-access-". Copies what it keeps; ignored
 * when c is NULL, the body is over RCACHE_MAX_BODY, the literal is not plain,
 * or the body has token names the cache cannot stand in for. Never inside
 * an arena scope (mem.h): fatal.
 */
void rcache_put(struct rcache *c, unsigned key, const char *body, size_t len, size_t hole, size_t hole_len,
		const char *ans, size_t ans_len, size_t ans_hole, size_t ans_hole_len, bool names_free, int tag);

/* Hits and misses so far (for /metrics). */
void rcache_stats(const struct rcache *c, unsigned long long *hits, unsigned long long *misses);

#endif
