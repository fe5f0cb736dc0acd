/*
 * azblob_int.h - between egress/azblob.c (the upload: blocks, buffers,
 * threads), egress/azblob_set.c (a provider's settings bound and checked,
 * an upload's target made from them), egress/azblob_req.c (one Blob service
 * request: URL, headers, SharedKey signature or SAS or bearer token,
 * retries, the service's error) and egress/azblob_cred.c (bearer tokens
 * from a managed identity or a federated token, refreshed before they
 * lapse).
 */
#ifndef DP_EGRESS_AZBLOB_INT_H
#define DP_EGRESS_AZBLOB_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "azblob.h"
#include "errors.h"
#include "cloud/webc.h"
#include "settings.h"

#define AZ_VERSION "2021-12-02" /* x-ms-version: SharedKey's 2009-09-19+ string-to-sign, bearer tokens */
#define AZ_RESOURCE "https://storage.azure.com/"

enum az_auth { AZ_SAS, AZ_KEY, AZ_BEARER };

struct az_tok; /* a bearer token source (azblob_cred.c) */

/* Where one upload goes and how it signs; resolved once in begin, shared by its threads. */
struct az_target {
	char *base;       /* scheme://host[:port] */
	char *path;       /* the blob's path, encoded: "/[account/]container/prefix/name" */
	char *account;    /* the account name (SharedKey's canonical resource) */
	char *desc;       /* the blob's URL without a signature, for messages and the location */
	enum az_auth auth;
	char *sas;        /* AZ_SAS: the query to append, without '?'; wiped */
	unsigned char *key; /* AZ_KEY: the decoded account key; wiped */
	size_t key_len;
	struct az_tok *tok; /* AZ_BEARER */
	struct webc_opts web;
	int attempts;       /* tries per request */
	long retry_base_ms; /* the first backoff; doubled each time, capped, jittered */
};
void az_target_free(struct az_target *t);

/* The settings of one provider (nodes of the settings tree, borrowed); sas and key resolved through Egress:Properties. */
struct az_set {
	const char *prov;
	const char *first_where; /* where the provider's first setting came from: for a setting that is missing */
	const struct settings_node *uri, *container, *prefix, *sas, *key, *mi;
	char sas_name[160], key_name[160]; /* for messages: "SharedAccessSignature" or "Egress:Properties:NAME" */
	const struct settings_node *meta[AZBLOB_MAX_META];
	size_t n_meta;
};

/* The account URI's parts: scheme://host[:port] and a path ("" or "/ACCOUNT", no trailing '/'). */
struct az_uri {
	char *base, *path, *account; /* account: NULL when neither the path nor the host names one */
	bool https;
};

/*
 * p's settings into s (borrowing p's nodes), each marked read; what p sets that this store does not take is
 * refused by its path and source, with the name it misspells.
 */
int az_read_settings(const struct egress_provider *p, struct az_set *s, struct err_msg *em);
/* s checked: the required ones set, the URI parsed into u (az_uri_free it, even on failure), the container's
 * name, the credential's shape, https for a bearer token. */
int az_check_settings(const struct az_set *s, struct az_uri *u, struct err_msg *em);
void az_uri_free(struct az_uri *u);
/* t for the blob NAME (under BlobPrefix) of checked settings s and their URI: where it goes, how it signs. */
int az_make_target(const struct az_set *s, const struct az_uri *uri, const char *name, struct az_target *t,
		   struct err_msg *em);
/* The store's check (store.h): p's settings read and checked, nothing sent. */
int az_check(const struct egress_provider *p, struct err_msg *em);

/* One request to the blob. */
struct az_call {
	const char *method;
	const char *what;               /* "Put Block 3": for messages */
	const char *const *query;       /* name, value pairs (raw: encoded here), NULL-terminated, or NULL */
	const char *const *headers;     /* "Name: value" besides x-ms-date, x-ms-version and the authorization */
	const void *body;
	size_t len;
	const char *const *want_headers;
};

/*
 * Send call on *conn (opened, or opened again after a failure, as needed),
 * signed as t says, tried again on no answer (reset, timeout), 408, 429 and
 * 5xx with exponential backoff and jitter, t->attempts times in all. 0 with
 * a 2xx answer in resp (the caller frees it); else the code (DP_EAUTH for
 * 401 and 403, DP_ENOTFOUND for 404, DP_EREMOTE for other answers, DP_EIO
 * for none) and em: "Azure Blob WHAT URL: Code: Message (HTTP n)", never a
 * signature, key or token.
 */
int az_send(struct az_target *t, struct webc_conn **conn, const struct az_call *call, struct webc_resp *resp,
	    struct err_msg *em);

/*
 * SharedKey's string-to-sign (Blob service, version 2009-09-19 and later)
 * for a request: method, the encoded path, the raw query pairs, the
 * headers as sent (x-ms-* and the standard ones), the body's length. New
 * string. Exposed for tests/unit/test_azblob.c.
 */
char *az_string_to_sign(const char *method, const char *account, const char *path, const char *const *query,
			const char *const *headers, size_t len);

/*
 * A bearer token source for client_id (may be NULL): chosen as the Azure
 * SDK's ManagedIdentityCredential chooses, from the environment: App
 * Service (IDENTITY_ENDPOINT, IDENTITY_HEADER), workload identity
 * (AZURE_FEDERATED_TOKEN_FILE, AZURE_TENANT_ID, AZURE_CLIENT_ID,
 * AZURE_AUTHORITY_HOST), else the instance metadata service (IMDS; its
 * address from AZURE_POD_IDENTITY_AUTHORITY_HOST when set). Nothing is
 * fetched yet. web: borrowed for the source's life.
 */
struct az_tok *az_tok_new(const char *client_id, const struct webc_opts *web);
void az_tok_free(struct az_tok *t); /* NULL-safe; the token is wiped */
/*
 * "Authorization: Bearer TOKEN" (a new string: wipe it before freeing),
 * fetching a token when there is none or when the one held lapses within 5
 * minutes. DP_EAUTH with em naming the source and its error (never the
 * token or the assertion). Thread-safe.
 */
int az_tok_header(struct az_tok *t, char **out, struct err_msg *em);

#endif
