/*
 * ecs_driver.c - fleet_ecs_discover and SigV4 driven from a test
 * (fleet_ecs.sh), until `diagport ps --ecs-cluster` exists:
 *
 *   ecs_driver discover CLUSTER [--service S] [--region R] [--profile P] [--public-ip] [--probe]
 *       one JSON line for the caller, then one per agent (its token only as "token": true/false);
 *       --probe: GET URL/processes with the token, its status as "probe". Exit 1 with
 *       {"error": ..., "message": ...} when discovery fails.
 *   ecs_driver sign METHOD URL SERVICE REGION AMZDATE BODY [HEADER...]
 *       the headers aws_sigv4_sign adds, one per line, for the keys in AWS_ACCESS_KEY_ID,
 *       AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN (compared with botocore's).
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "cloud/aws_sigv4.h"
#include "fleet/fleet.h"
#include "hclient.h"
#include "mem.h"

static void put(json_t *o, const char *k, const char *v)
{
	json_object_set_new(o, k, v ? json_string(v) : json_null());
}

/* Print j as one line and release it. */
static void emit(json_t *j)
{
	char *t = json_dumps(j, JSON_COMPACT);

	puts(t);
	free(t);
	json_decref(j);
}

static long probe(const struct fleet_agent *a)
{
	char *url = mem_printf("%s/processes", a->url), *auth = a->token ? mem_printf("Authorization: Bearer %s", a->token) : NULL;
	const char *h[] = { auth, NULL };
	struct hclient_req req = { .method = "GET", .url = url, .headers = auth ? h : NULL, .timeout_ms = 5000 };
	long status = -1;
	struct err_msg em;

	if (hclient_request(&req, &status, NULL, &em) != 0)
		status = 0;
	free(url);
	if (auth) {
		mem_wipe(auth, strlen(auth));
		free(auth);
	}
	return status;
}

static int discover(int argc, char **argv)
{
	struct fleet_ecs_opts o = { .cluster = argv[2], .timeout_ms = 5000 };
	struct fleet_set s = { 0 };
	struct err_msg em = { "" };
	bool do_probe = false;
	json_t *j;
	int rc;

	for (int i = 3; i < argc; i++) {
		if (strcmp(argv[i], "--service") == 0 && i + 1 < argc)
			o.service = argv[++i];
		else if (strcmp(argv[i], "--region") == 0 && i + 1 < argc)
			o.region = argv[++i];
		else if (strcmp(argv[i], "--profile") == 0 && i + 1 < argc)
			o.profile = argv[++i];
		else if (strcmp(argv[i], "--public-ip") == 0)
			o.public_ip = true;
		else if (strcmp(argv[i], "--probe") == 0)
			do_probe = true;
	}
	if ((rc = fleet_ecs_discover(&o, &s, &em)) != 0) {
		j = json_pack("{s:s, s:s}", "error", err_str(rc), "message", em.text);
		emit(j);
		return 1;
	}
	j = json_object();
	put(j, "caller", s.caller);
	json_object_set_new(j, "n", json_integer((json_int_t)s.n));
	emit(j);
	for (size_t i = 0; i < s.n; i++) {
		const struct fleet_agent *a = &s.v[i];

		j = json_object();
		put(j, "name", a->name);
		fleet_agent_describe(j, a);
		put(j, "url", a->url); /* with or without a dialer */
		put(j, "mode", a->mode);
		put(j, "why_not", a->why_not);
		json_object_set_new(j, "port", json_integer(a->port));
		json_object_set_new(j, "token", json_boolean(a->token != NULL));
		if (do_probe && a->url)
			json_object_set_new(j, "probe", json_integer(probe(a)));
		emit(j);
	}
	fleet_set_free(&s);
	return 0;
}

static int sign(int argc, char **argv)
{
	struct aws_creds c = { .access_key = getenv("AWS_ACCESS_KEY_ID"), .secret_key = getenv("AWS_SECRET_ACCESS_KEY"),
			       .token = getenv("AWS_SESSION_TOKEN") };
	struct aws_sigv4_req r = { .method = argv[2], .url = argv[3], .service = argv[4], .region = argv[5],
				   .amz_date = argv[6], .body = argv[7], .body_len = strlen(argv[7]),
				   .headers = (const char *const *)&argv[8] };
	char *out[AWS_SIGV4_MAX] = { 0 };
	struct err_msg em;

	(void)argc;
	if (c.token && *c.token == '\0')
		c.token = NULL;
	if (aws_sigv4_sign(&r, &c, out, &em) != 0) {
		fprintf(stderr, "%s\n", em.text);
		return 1;
	}
	for (int i = 0; out[i]; i++)
		puts(out[i]);
	aws_sigv4_free(out);
	return 0;
}

int main(int argc, char **argv)
{
	mem_install();
	if (argc >= 3 && strcmp(argv[1], "discover") == 0)
		return discover(argc, argv);
	if (argc >= 8 && strcmp(argv[1], "sign") == 0)
		return sign(argc, argv);
	fprintf(stderr, "usage: ecs_driver discover CLUSTER [...] | sign METHOD URL SERVICE REGION AMZDATE BODY [HEADER...]\n");
	return 2;
}
