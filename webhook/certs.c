/*
 * certs.c - `diagport webhook certs`: decide, then write (certs.h).
 *
 * A round reads the Secret, decides what it should hold (decide(): keep,
 * prune, renew the serving certificate, renew the CA, or create), makes and
 * checks every certificate that needs making, and only then writes: first
 * the caBundle of the webhooks (sync_bundle()), then the Secret (POST for a
 * new one, PUT of the object as read, with its resourceVersion, for an
 * existing one). When a write meets a newer version (409, or 422 for a
 * failed JSON Patch `test`) the round starts again from a fresh read, at
 * most MAX_ROUNDS times: another Job won a race, and what it wrote may well
 * be kept.
 *
 * The Secret is edited, not rebuilt: a PUT sends the object as read with our
 * four data keys and our label set, so other keys, labels and annotations
 * survive. Key material is wiped wherever this file holds it: decoded keys,
 * base64 strings inside jansson values, the serialized request body.
 *
 * Kept as one file a little over 600 lines: it is one idea, a round, whose
 * halves (decide, write) share the plan, the names and the wiping rules,
 * and read as the round runs, top to bottom.
 */
#include "certs.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "buf.h"
#include "certgen.h"
#include "log.h"
#include "mem.h"

#define MAX_ROUNDS 5
#define DAY_S 86400L
#define MAX_VALUE ((size_t)256 << 10) /* one decoded value of the Secret */
#define PART_OF "app.kubernetes.io/part-of"
#define SECRET_TYPE "kubernetes.io/tls"

enum { TLS_CRT, TLS_KEY, CA_CRT, CA_KEY, N_KEYS };
static const char *const data_keys[N_KEYS] = { "tls.crt", "tls.key", "ca.crt", "ca.key" };

const char *certs_action_name(enum certs_action a)
{
	switch (a) {
	case CERTS_CREATED: return "created";
	case CERTS_KEPT: return "kept";
	case CERTS_PRUNED: return "kept (expired CA removed from ca.crt)";
	case CERTS_RENEWED_SERVING: return "renewed serving certificate";
	case CERTS_RENEWED_CA: return "renewed CA";
	}
	return "?";
}

/* The names a serving certificate is for: SVC, SVC.NS, SVC.NS.svc, SVC.NS.svc.DOMAIN; CN SVC.NS.svc. */
struct names {
	char *dns[4];
	const char *cn;
};

static void names_make(const struct certs_config *cfg, struct names *n)
{
	n->dns[0] = mem_strdup(cfg->service);
	n->dns[1] = mem_printf("%s.%s", cfg->service, cfg->ns);
	n->dns[2] = mem_printf("%s.%s.svc", cfg->service, cfg->ns);
	n->dns[3] = mem_printf("%s.%s.svc.%s", cfg->service, cfg->ns, cfg->cluster_domain);
	n->cn = n->dns[2];
}

static void names_free(struct names *n)
{
	for (int i = 0; i < 4; i++)
		free(n->dns[i]);
}

/* What the Secret should hold after this run, and how we got there. */
struct plan {
	enum certs_action action;
	bool write;
	char why[600];
	struct certgen_pair serving; /* tls.crt, tls.key */
	struct certgen_pair ca;      /* the signing CA's certificate (ca.crt's first) and ca.key */
	struct buf bundle;           /* ca.crt, which is also the caBundle */
	time_t ca_end, serving_end;
};

static void plan_free(struct plan *p)
{
	certgen_pair_free(&p->serving);
	certgen_pair_free(&p->ca);
	buf_free(&p->bundle);
}

static void wipe_strings(json_t *obj)
{
	const char *k;
	json_t *v;

	json_object_foreach(obj, k, v)
		if (json_is_string(v))
			mem_wipe((char *)json_string_value(v), json_string_length(v));
}

/* Free a Secret object after wiping its data's storage. Accepts NULL. */
static void secret_free(json_t *s)
{
	if (s)
		wipe_strings(json_object_get(s, "data"));
	json_decref(s);
}

static char *dup_pair_value(const char *v, size_t n, size_t *len)
{
	char *p = mem_alloc(n + 1);

	memcpy(p, v, n);
	p[n] = '\0';
	*len = n;
	return p;
}

/* decoded[i]: the Secret's data[data_keys[i]] decoded, or NULL when missing or not base64. */
static void decode_data(json_t *secret, char *decoded[N_KEYS], size_t len[N_KEYS])
{
	json_t *data = json_object_get(secret, "data");

	for (int i = 0; i < N_KEYS; i++) {
		json_t *v = json_object_get(data, data_keys[i]);

		decoded[i] = NULL;
		len[i] = 0;
		if (json_is_string(v) &&
		    b64_decode(json_string_value(v), json_string_length(v), MAX_VALUE, &decoded[i], &len[i]) != 0)
			decoded[i] = NULL;
	}
}

static void when(time_t t, char *out, size_t n)
{
	struct tm tm;

	if (gmtime_r(&t, &tm) == NULL || strftime(out, n, "%Y-%m-%d", &tm) == 0)
		snprintf(out, n, "@%lld", (long long)t);
}

/* A new CA into p->ca, and the first certificate of the bundle. */
static int new_ca(const struct certs_config *cfg, time_t now, struct plan *p, struct err_msg *em)
{
	char cn[64];
	struct certgen_spec spec = { .cn = cn, .now = now, .days = cfg->ca_validity_days };
	int rc;

	snprintf(cn, sizeof(cn), "diagport-webhook-ca@%lld", (long long)now); /* tells one CA from the next */
	if ((rc = certgen_ca(&spec, &p->ca, em)) != 0)
		return rc;
	return buf_append(&p->bundle, p->ca.cert, p->ca.cert_len);
}

static int new_serving(const struct certs_config *cfg, const struct names *nm, time_t now, struct plan *p,
		       struct err_msg *em)
{
	struct certgen_spec spec = { .cn = nm->cn, .dns = (const char *const *)nm->dns, .n_dns = 4, .now = now,
				     .days = cfg->validity_days };

	return certgen_serving(&spec, &p->ca, &p->serving, em);
}

/*
 * Append the still-valid CAs of the stored ca.crt to the bundle: the stored
 * text itself, byte for byte, when all of it is kept (a caBundle compared
 * with it stays equal); *dropped counts what was left out.
 */
static int keep_old_cas(const char *ca, size_t ca_len, time_t now, struct plan *p, size_t *dropped, struct err_msg *em)
{
	size_t kept = 0, drop = 0, start = p->bundle.len;
	int rc;

	if ((rc = certgen_bundle_filter(ca, ca_len, now, 0, &p->bundle, &kept, &drop, em)) != 0)
		return rc;
	if (drop == 0 && kept > 0) {
		p->bundle.len = start;
		p->bundle.data[start] = '\0';
		if ((rc = buf_append(&p->bundle, ca, ca_len)) != 0)
			return rc;
	}
	*dropped = drop;
	return 0;
}

/*
 * The decision on an existing Secret's data (s[i], len[i]; NULL when
 * missing). Fills p: what to store, whether to write, and why.
 */
static int decide_existing(const struct certs_config *cfg, const struct names *nm, time_t now, char *s[N_KEYS],
			   size_t len[N_KEYS], struct plan *p, struct err_msg *em)
{
	static const char none[] = "";
	struct certgen_pair stored = { .cert = s[TLS_CRT] ? s[TLS_CRT] : (char *)none, .cert_len = len[TLS_CRT],
				       .key = s[TLS_KEY] ? s[TLS_KEY] : (char *)none, .key_len = len[TLS_KEY] };
	const char *ca = s[CA_CRT] ? s[CA_CRT] : none;
	struct err_msg ca_why = { "" }, srv_why = { "" }, key_why = { "" };
	time_t ca_end = 0, srv_end = 0, key_end = 0, renew = cfg->renew_before_days * DAY_S;
	bool ca_keep, srv_keep, can_sign;
	char t[32];
	size_t dropped = 0;
	int ca_rc, srv_rc, key_rc, rc;

	ca_rc = certgen_check_ca(ca, len[CA_CRT], NULL, 0, now, &ca_end, &ca_why);
	key_rc = s[CA_KEY] ? certgen_check_ca(ca, len[CA_CRT], s[CA_KEY], len[CA_KEY], now, &key_end, &key_why)
			   : err_set(&key_why, DP_EINVAL, "the Secret has no ca.key");
	srv_rc = certgen_check_serving(&stored, ca, len[CA_CRT], (const char *const *)nm->dns, 4, now, &srv_end, &srv_why);
	/* GnuTLS missing or failing is not a verdict on the certificates */
	for (int i = 0; i < 3; i++) {
		int r = i == 0 ? ca_rc : i == 1 ? srv_rc : key_rc;

		if (r == DP_ECRYPTO || r == DP_ENOLIB)
			return err_set(em, r, "%s", i == 0 ? ca_why.text : i == 1 ? srv_why.text : key_why.text);
	}
	ca_keep = ca_rc == 0 && ca_end - now > renew;
	srv_keep = srv_rc == 0 && srv_end - now > renew;
	if (ca_keep && srv_keep) {
		if ((rc = keep_old_cas(ca, len[CA_CRT], now, p, &dropped, em)) != 0)
			return rc;
		p->action = dropped ? CERTS_PRUNED : CERTS_KEPT;
		p->write = dropped > 0;
		p->serving.cert = dup_pair_value(stored.cert, stored.cert_len, &p->serving.cert_len);
		p->serving.key = dup_pair_value(stored.key, stored.key_len, &p->serving.key_len);
		p->ca.cert = dup_pair_value(ca, len[CA_CRT], &p->ca.cert_len);
		if (s[CA_KEY])
			p->ca.key = dup_pair_value(s[CA_KEY], len[CA_KEY], &p->ca.key_len);
		return 0;
	}
	if (!ca_keep && ca_rc != 0) {
		snprintf(p->why, sizeof(p->why), "%.500s", ca_why.text);
	} else if (!ca_keep) {
		when(ca_end, t, sizeof(t));
		snprintf(p->why, sizeof(p->why), "the CA expires on %s, within %d days (--renew-before-days)", t,
			 cfg->renew_before_days);
	} else if (srv_rc != 0) {
		snprintf(p->why, sizeof(p->why), "%.500s", srv_why.text);
	} else {
		when(srv_end, t, sizeof(t));
		snprintf(p->why, sizeof(p->why), "tls.crt expires on %s, within %d days (--renew-before-days)", t,
			 cfg->renew_before_days);
	}
	can_sign = ca_keep && key_rc == 0 && ca_end > now + cfg->validity_days * DAY_S;
	p->write = true;
	if (can_sign) {
		p->action = CERTS_RENEWED_SERVING;
		p->ca.cert = dup_pair_value(ca, len[CA_CRT], &p->ca.cert_len);
		p->ca.key = dup_pair_value(s[CA_KEY], len[CA_KEY], &p->ca.key_len);
		if ((rc = new_serving(cfg, nm, now, p, em)) != 0)
			return rc;
		return keep_old_cas(ca, len[CA_CRT], now, p, &dropped, em);
	}
	if (ca_keep) {
		size_t n = strlen(p->why);

		if (key_rc != 0) {
			snprintf(p->why + n, sizeof(p->why) - n, "; the CA cannot sign a new one: %s", key_why.text);
		} else {
			when(ca_end, t, sizeof(t));
			snprintf(p->why + n, sizeof(p->why) - n,
				 "; the CA expires on %s, before a new certificate would (--validity-days %d)", t,
				 cfg->validity_days);
		}
	}
	p->action = CERTS_RENEWED_CA;
	if ((rc = new_ca(cfg, now, p, em)) != 0 || (rc = new_serving(cfg, nm, now, p, em)) != 0)
		return rc;
	return keep_old_cas(ca, len[CA_CRT], now, p, &dropped, em);
}

/* What the Secret should hold. secret: the object read, or NULL when there is none. */
static int decide(const struct certs_config *cfg, const struct names *nm, time_t now, json_t *secret, struct plan *p,
		  struct err_msg *em)
{
	char *s[N_KEYS];
	size_t len[N_KEYS];
	struct err_msg chk;
	bool made;
	int rc;

	buf_init(&p->bundle, (size_t)64 << 10);
	if (secret == NULL) {
		p->action = CERTS_CREATED;
		p->write = true;
		if ((rc = new_ca(cfg, now, p, em)) != 0 || (rc = new_serving(cfg, nm, now, p, em)) != 0)
			return rc;
	} else {
		const char *type = json_string_value(json_object_get(secret, "type"));

		if (type == NULL || strcmp(type, SECRET_TYPE) != 0)
			return err_set(em, DP_EREMOTE, "Secret %s/%s has type %s, not " SECRET_TYPE ", and the type of a "
				       "Secret cannot change: delete it, or name another with --secret", cfg->ns,
				       cfg->secret, type ? type : "(none)");
		decode_data(secret, s, len);
		rc = decide_existing(cfg, nm, now, s, len, p, em);
		for (int i = 0; i < N_KEYS; i++) {
			if (s[i])
				mem_wipe(s[i], len[i]);
			free(s[i]);
		}
		if (rc != 0)
			return rc;
	}
	/* what we store must pass the checks a later run makes, or that run would replace it again */
	made = p->action == CERTS_CREATED || p->action == CERTS_RENEWED_SERVING || p->action == CERTS_RENEWED_CA;
	if (certgen_check_ca(p->bundle.data, p->bundle.len, made ? p->ca.key : NULL, made ? p->ca.key_len : 0, now,
			     &p->ca_end, &chk) != 0 ||
	    certgen_check_serving(&p->serving, p->bundle.data, p->bundle.len, (const char *const *)nm->dns, 4, now,
				  &p->serving_end, &chk) != 0)
		return err_set(em, DP_ECRYPTO, "the certificates made do not pass their own checks: %s", chk.text);
	return 0;
}

/* GET the Secret: 0 with *out (NULL when there is none). */
static int get_secret(const struct certs_config *cfg, const char *what, json_t **out, struct err_msg *em)
{
	char *path = mem_printf("/api/v1/namespaces/%s/secrets/%s", cfg->ns, cfg->secret);
	struct kubeapi_resp r = { 0 };
	int rc;

	if ((rc = kubeapi_call(cfg->api, "GET", path, NULL, NULL, 0, &r, em)) != 0) {
		err_prefix(em, "%s", what);
	} else if (r.status == 404) {
		*out = NULL;
	} else if (r.status != 200 || !json_is_object(r.body)) {
		rc = r.status == 200 ? err_set(em, DP_EREMOTE, "%s: GET answered 200 without a JSON object", what)
				     : kubeapi_error(&r, "GET", what, em);
	} else {
		*out = json_incref(r.body);
	}
	if (rc != 0 && r.body)
		wipe_strings(json_object_get(r.body, "data"));
	kubeapi_resp_free(&r);
	free(path);
	return rc;
}

/* Set obj[key] to a new string with b64 of v[0..n), wiping the old value's storage first. */
static void set_b64(json_t *obj, const char *key, const char *v, size_t n)
{
	json_t *old = json_object_get(obj, key);
	size_t len;
	char *s = b64_encode(v, n, &len);

	if (json_is_string(old))
		mem_wipe((char *)json_string_value(old), json_string_length(old));
	json_object_set_new(obj, key, json_stringn(s, len));
	mem_wipe(s, len);
	free(s);
}

/* The object to POST (have == NULL) or PUT: have as read, with our data and label. */
static json_t *secret_body(const struct certs_config *cfg, json_t *have, const struct plan *p)
{
	json_t *obj, *meta, *labels, *data;

	if (have)
		obj = json_deep_copy(have);
	else
		obj = json_pack("{s:s, s:s, s:{s:s, s:s}, s:s}", "apiVersion", "v1", "kind", "Secret", "metadata", "name",
				cfg->secret, "namespace", cfg->ns, "type", SECRET_TYPE);
	if (obj == NULL)
		DP_FATAL("jansson could not build a Secret");
	meta = json_object_get(obj, "metadata");
	if (!json_is_object(meta))
		json_object_set_new(obj, "metadata", meta = json_object());
	labels = json_object_get(meta, "labels");
	if (!json_is_object(labels))
		json_object_set_new(meta, "labels", labels = json_object());
	json_object_set_new(labels, PART_OF, json_string("diagport"));
	data = json_object_get(obj, "data");
	if (!json_is_object(data))
		json_object_set_new(obj, "data", data = json_object());
	set_b64(data, "tls.crt", p->serving.cert, p->serving.cert_len);
	set_b64(data, "tls.key", p->serving.key, p->serving.key_len);
	set_b64(data, "ca.crt", p->bundle.data, p->bundle.len);
	if (p->ca.key)
		set_b64(data, "ca.key", p->ca.key, p->ca.key_len);
	return obj;
}

/* POST or PUT the Secret. 0 (with *conflict when the API answered 409: read again). */
static int write_secret(const struct certs_config *cfg, const char *what, json_t *have, const struct plan *p,
			bool *conflict, struct err_msg *em)
{
	json_t *obj = secret_body(cfg, have, p);
	const char *method = have ? "PUT" : "POST";
	char *path = have ? mem_printf("/api/v1/namespaces/%s/secrets/%s", cfg->ns, cfg->secret)
			  : mem_printf("/api/v1/namespaces/%s/secrets", cfg->ns);
	size_t n = json_dumpb(obj, NULL, 0, JSON_COMPACT);
	char *body = mem_alloc(n + 1);
	struct kubeapi_resp r = { 0 };
	int rc;

	*conflict = false;
	json_dumpb(obj, body, n, JSON_COMPACT); /* the exact size: one copy of the keys, wiped below */
	body[n] = '\0';
	if ((rc = kubeapi_call(cfg->api, method, path, "application/json", body, n, &r, em)) != 0) {
		err_prefix(em, "%s", what);
	} else if (r.status == 409) {
		*conflict = true;
		log_info("API conflict", LOG_STR("event", "api-conflict"), LOG_STR("object", what),
			 LOG_STR("method", method), LOG_INT("status", 409), LOG_STR("reason", r.reason),
			 LOG_STR("message", r.message), LOG_STR("action", "reading it again"));
	} else if (r.status != 200 && r.status != 201) {
		rc = kubeapi_error(&r, method, what, em);
	}
	if (r.body)
		wipe_strings(json_object_get(r.body, "data"));
	kubeapi_resp_free(&r);
	mem_wipe(body, n);
	free(body);
	free(path);
	secret_free(obj);
	return rc;
}

/* The JSON Patch for the webhooks whose caBundle is not want; counts into res. */
static int bundle_ops(const struct certs_config *cfg, const char *what, json_t *mwc, const char *want,
		      json_t **ops, struct certs_result *res, struct err_msg *em)
{
	json_t *rv = json_object_get(json_object_get(mwc, "metadata"), "resourceVersion");
	json_t *hooks = json_object_get(mwc, "webhooks");
	int matched = 0;

	if (!json_is_string(rv))
		return err_set(em, DP_EREMOTE, "%s: the object read has no metadata.resourceVersion", what);
	*ops = json_pack("[{s:s, s:s, s:O}]", "op", "test", "path", "/metadata/resourceVersion", "value", rv);
	res->patched = res->current = res->skipped = 0;
	for (size_t i = 0; i < json_array_size(hooks); i++) {
		json_t *cc = json_object_get(json_array_get(hooks, i), "clientConfig");
		json_t *svc = json_object_get(cc, "service");
		const char *name = json_string_value(json_object_get(svc, "name"));
		const char *ns = json_string_value(json_object_get(svc, "namespace"));
		const char *have = json_string_value(json_object_get(cc, "caBundle"));
		char path[64];

		if (name == NULL || ns == NULL || strcmp(name, cfg->service) != 0 || strcmp(ns, cfg->ns) != 0) {
			res->skipped++;
			continue;
		}
		matched++;
		if (have && strcmp(have, want) == 0) {
			res->current++;
			continue;
		}
		/* "add" sets a member whether or not it is there (RFC 6902 4.1) */
		snprintf(path, sizeof(path), "/webhooks/%zu/clientConfig/caBundle", i);
		json_array_append_new(*ops, json_pack("{s:s, s:s, s:s}", "op", "add", "path", path, "value", want));
		res->patched++;
	}
	if (matched == 0) {
		json_decref(*ops);
		return err_set(em, DP_EREMOTE, "%s has no webhook whose clientConfig.service is %s/%s (%zu webhooks)", what,
			       cfg->ns, cfg->service, json_array_size(hooks));
	}
	return 0;
}

/* Make every webhook of ours trust the bundle (want: base64 of it). */
static int sync_bundle(const struct certs_config *cfg, const char *want, struct certs_result *res, struct err_msg *em)
{
	char *path = mem_printf("/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/%s",
				cfg->webhook_config);
	char *what = mem_printf("MutatingWebhookConfiguration %s", cfg->webhook_config);
	int rc = 0, round;

	for (round = 0; round < MAX_ROUNDS; round++) {
		struct kubeapi_resp r = { 0 };
		json_t *ops = NULL;
		char *body;

		if ((rc = kubeapi_call(cfg->api, "GET", path, NULL, NULL, 0, &r, em)) != 0) {
			err_prefix(em, "%s", what);
			break;
		}
		if (r.status != 200) {
			rc = kubeapi_error(&r, "GET", what, em);
			if (r.status == 404 && em) {
				size_t n = strlen(em->text);

				snprintf(em->text + n, sizeof(em->text) - n, " (the webhook configuration is missing: "
					 "was manifests/overlays/self-contained applied?)");
			}
			kubeapi_resp_free(&r);
			break;
		}
		rc = bundle_ops(cfg, what, r.body, want, &ops, res, em);
		kubeapi_resp_free(&r);
		if (rc != 0 || res->patched == 0 || cfg->dry_run) {
			json_decref(ops);
			break;
		}
		body = json_dumps(ops, JSON_COMPACT);
		json_decref(ops);
		rc = kubeapi_call(cfg->api, "PATCH", path, "application/json-patch+json", body, strlen(body), &r, em);
		free(body);
		if (rc != 0) {
			err_prefix(em, "%s", what);
			break;
		}
		if (r.status == 409 || r.status == 422) { /* 422: our `test` failed: it changed since we read it */
			res->conflicts++;
			log_info("API conflict", LOG_STR("event", "api-conflict"), LOG_STR("object", what),
				 LOG_STR("method", "PATCH"), LOG_INT("status", r.status), LOG_STR("reason", r.reason),
				 LOG_STR("message", r.message), LOG_STR("action", "reading it again"));
			kubeapi_resp_free(&r);
			continue;
		}
		if (r.status != 200)
			rc = kubeapi_error(&r, "PATCH", what, em);
		kubeapi_resp_free(&r);
		break;
	}
	if (round == MAX_ROUNDS)
		rc = err_set(em, DP_EREMOTE, "%s: still changing under us after %d tries", what, MAX_ROUNDS);
	free(what);
	free(path);
	return rc;
}

static bool dns_label(const char *s, size_t max, bool dots)
{
	size_t n = strlen(s);

	if (n == 0 || n > max || s[0] == '-' || s[0] == '.' || s[n - 1] == '-' || s[n - 1] == '.')
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '-' || (dots && *s == '.')))
			return false;
	return true;
}

static int check_config(const struct certs_config *c, struct err_msg *em)
{
	if (!dns_label(c->ns, 63, false) || !dns_label(c->service, 63, false))
		return err_set(em, DP_EINVAL, "--namespace and --service must be DNS labels (a-z, 0-9, '-', at most 63)");
	if (!dns_label(c->secret, 253, true) || !dns_label(c->webhook_config, 253, true))
		return err_set(em, DP_EINVAL, "--secret and --webhook-configuration must be DNS subdomain names "
					      "(a-z, 0-9, '-', '.', at most 253)");
	if (!dns_label(c->cluster_domain, 200, true))
		return err_set(em, DP_EINVAL, "--cluster-domain '%s' is not a DNS name", c->cluster_domain);
	if (c->renew_before_days < 1 || c->renew_before_days >= c->validity_days)
		return err_set(em, DP_EINVAL, "--renew-before-days (%d) must be at least 1 and less than --validity-days "
					      "(%d), or every run would renew", c->renew_before_days, c->validity_days);
	if (c->validity_days >= c->ca_validity_days || c->ca_validity_days > 36500)
		return err_set(em, DP_EINVAL, "--validity-days (%d) must be less than --ca-validity-days (%d), which is "
					      "at most 36500", c->validity_days, c->ca_validity_days);
	return 0;
}

int certs_run(const struct certs_config *cfg, struct certs_result *res, struct err_msg *em)
{
	char *what = mem_printf("Secret %s/%s", cfg->ns, cfg->secret);
	time_t now = cfg->now ? cfg->now : time(NULL);
	struct certs_result r = { 0 };
	struct names nm = { .cn = NULL };
	int rc, round;

	if ((rc = check_config(cfg, em)) != 0) {
		free(what);
		return rc;
	}
	names_make(cfg, &nm);
	for (round = 0; round < MAX_ROUNDS; round++) {
		struct plan p = { 0 };
		json_t *have = NULL;
		bool conflict = false;
		char *want;

		if ((rc = get_secret(cfg, what, &have, em)) != 0)
			break;
		if ((rc = decide(cfg, &nm, now, have, &p, em)) != 0) {
			secret_free(have);
			plan_free(&p);
			break;
		}
		want = b64_encode(p.bundle.data, p.bundle.len, NULL);
		rc = sync_bundle(cfg, want, &r, em);
		free(want);
		if (rc == 0 && p.write && !cfg->dry_run)
			rc = write_secret(cfg, what, have, &p, &conflict, em);
		if (conflict)
			r.conflicts++;
		r.action = p.action;
		snprintf(r.why, sizeof(r.why), "%s", p.why);
		r.ca_not_after = p.ca_end;
		r.serving_not_after = p.serving_end;
		r.bundle_cas = (int)certgen_count(p.bundle.data, p.bundle.len);
		secret_free(have);
		plan_free(&p);
		if (rc != 0 || !conflict)
			break;
	}
	if (round == MAX_ROUNDS)
		rc = err_set(em, DP_EREMOTE, "%s: still changing under us after %d tries", what, MAX_ROUNDS);
	names_free(&nm);
	free(what);
	if (rc == 0)
		*res = r;
	return rc;
}
