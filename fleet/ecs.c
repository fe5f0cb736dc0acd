/*
 * ecs.c - ECS discovery for the fleet client (fleet_ecs_discover, fleet.h).
 *
 * ListTasks (paginated) gives the cluster's running tasks, DescribeTasks (100
 * at a time) what each is, DescribeTaskDefinition (once per distinct task
 * definition) what the injector put in it (injector/agent.c, injector/ecs.c):
 * a container named diagport-agent with its port mapping diag-http and,
 * when injected with a token, the secret DIAGPORT_AUTH_TOKEN; the app
 * containers' DOTNET_DiagnosticPorts at /diag/port with nosuspend or
 * suspend. A task is reachable at its own ENI's address (awsvpc: Fargate,
 * or EC2 with awsvpc); in bridge or host mode it has none of its own. The
 * token is read from Secrets Manager when the caller may (GetSecretValue);
 * the caller's identity from STS. Every call goes through aws.c.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aws.h"
#include "fleet.h"
#include "mem.h"
#include "taddr.h"

#define AGENT "diagport-agent"
#define SOCKET "/diag/port"
#define ECS_TARGET "AmazonEC2ContainerServiceV20141113."
#define MAX_TASKS 5000  /* what one ps may list; ListTasks pages beyond it are not read */
#define MAX_PAGES 1000  /* ListTasks pages, however few tasks each holds */
#define BATCH 100       /* DescribeTasks' limit */
#define MAX_SECRETS 256 /* distinct token secrets looked up */

struct secret {
	char *id, *stage, *version; /* what GetSecretValue is asked for */
	int rc;
	char *value;                /* SecretString (wiped when freed), or NULL */
	char why[400];              /* rc != 0: the reason, for why_not */
};

struct disc {
	const struct fleet_ecs_opts *o;
	struct aws_client c;
	char *endpoint;
	const char *cluster; /* short name */
	bool local;          /* the ECS endpoint is overridden (a stand-in, LocalStack): loopback tasks are real */
	json_t *tds;         /* task definition ARN → taskDefinition */
	struct secret sec[MAX_SECRETS];
	size_t nsec;
};

static const char *js(const json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

static bool eq(const char *a, const char *b)
{
	return a && b && strcmp(a, b) == 0;
}

/* Wipe every string of a tree that held a secret before it is released. */
static void wipe_json(json_t *j)
{
	const char *k;
	json_t *v;
	size_t i;

	if (json_is_string(j))
		mem_wipe((char *)json_string_value(j), json_string_length(j));
	else if (json_is_object(j))
		json_object_foreach(j, k, v) {
			wipe_json(v);
		}
	else if (json_is_array(j))
		json_array_foreach(j, i, v) {
			wipe_json(v);
		}
}

/* The ARN's last '/'-separated part ("arn:aws:ecs:r:a:task/prod/0123" → "0123"). */
static const char *last_part(const char *arn)
{
	const char *s = strrchr(arn, '/');

	return s ? s + 1 : arn;
}

/* One ECS call; API errors become sentences about the cluster. */
static int ecs_call(struct disc *d, const char *op, json_t *in, json_t **out, struct err_msg *em)
{
	char target[128], action[64];
	struct aws_error ae;
	struct aws_json_call call = { .endpoint = d->endpoint, .service = "ecs", .target = target, .action = action };
	int rc;

	snprintf(target, sizeof(target), ECS_TARGET "%s", op);
	snprintf(action, sizeof(action), "ecs:%s", op);
	rc = aws_json(&d->c, &call, in, out, &ae, em);
	json_decref(in);
	if (rc == 0 || ae.status == 0)
		return rc;
	if (eq(ae.type, "AccessDeniedException"))
		return err_set(em, DP_EAUTH, "not authorized to perform %s on cluster %s (credentials from %s): %s", action,
			       d->cluster, d->c.creds.source, ae.message);
	if (eq(ae.type, "ClusterNotFoundException"))
		return err_set(em, DP_ENOTFOUND, "ECS cluster %s not found in region %s (%s at %s)", d->cluster,
			       d->c.region, action, d->endpoint);
	if (eq(ae.type, "ServiceNotFoundException"))
		return err_set(em, DP_ENOTFOUND, "ECS service %s not found in cluster %s (region %s)",
			       d->o->service ? d->o->service : "?", d->cluster, d->c.region);
	if (rc == DP_EAUTH)
		return err_set(em, DP_EAUTH, "AWS refused the credentials from %s (access key %s) for %s: %s: %s",
			       d->c.creds.source, d->c.creds.access_key, action, ae.type, ae.message);
	err_prefix(em, "ECS cluster %s", d->cluster);
	return rc;
}

static int list_tasks(struct disc *d, json_t *arns, struct err_msg *em)
{
	json_t *tokens = json_object(); /* the nextTokens given so far: one again would loop */
	char *next = NULL;
	size_t pages = 0;
	int rc = 0;

	do {
		json_t *in = json_pack("{s:s, s:s, s:i}", "cluster", d->o->cluster, "desiredStatus", "RUNNING",
				       "maxResults", BATCH), *out = NULL;

		if (d->o->service)
			json_object_set_new(in, "serviceName", json_string(d->o->service));
		if (next)
			json_object_set_new(in, "nextToken", json_string(next));
		free(next);
		next = NULL;
		if ((rc = ecs_call(d, "ListTasks", in, &out, em)) != 0)
			break;
		json_array_extend(arns, json_object_get(out, "taskArns"));
		pages++;
		if (js(out, "nextToken") && *js(out, "nextToken") && json_array_size(arns) < MAX_TASKS) {
			if (json_object_get(tokens, js(out, "nextToken")))
				rc = err_set(em, DP_EREMOTE, "ecs:ListTasks on cluster %s: the same nextToken came again after "
					     "%zu pages (%zu tasks): its pages would never end", d->cluster, pages,
					     json_array_size(arns));
			else if (pages >= MAX_PAGES)
				rc = err_set(em, DP_EREMOTE, "ecs:ListTasks on cluster %s: the pages did not end after %d "
					     "pages (%zu tasks)", d->cluster, MAX_PAGES, json_array_size(arns));
			else
				json_object_set_new(tokens, js(out, "nextToken"), json_true());
			next = rc == 0 ? mem_strdup(js(out, "nextToken")) : NULL;
		}
		json_decref(out);
	} while (next);
	json_decref(tokens);
	return rc;
}

static int describe_tasks(struct disc *d, json_t *arns, json_t *tasks, struct err_msg *em)
{
	for (size_t i = 0; i < json_array_size(arns) && i < MAX_TASKS; i += BATCH) {
		json_t *batch = json_array(), *out = NULL;
		size_t asked;
		int rc;

		for (size_t k = i; k < i + BATCH && k < json_array_size(arns); k++)
			json_array_append(batch, json_array_get(arns, k));
		asked = json_array_size(batch); /* the call takes batch */
		rc = ecs_call(d, "DescribeTasks", json_pack("{s:s, s:o}", "cluster", d->o->cluster, "tasks", batch),
			      &out, em);
		if (rc != 0)
			return rc;
		/* failures[] (a task gone since ListTasks) are left out, as they are no longer running; no more
		 * tasks than were asked for are taken, so MAX_TASKS holds whatever the answer holds */
		for (size_t k = 0; k < json_array_size(json_object_get(out, "tasks")) && k < asked; k++)
			json_array_append(tasks, json_array_get(json_object_get(out, "tasks"), k));
		json_decref(out);
	}
	return 0;
}

/* The task definition (borrowed from d->tds), described once per ARN. */
static int task_def(struct disc *d, const char *arn, json_t **td, struct err_msg *em)
{
	json_t *out = NULL;
	int rc;

	if ((*td = json_object_get(d->tds, arn)) != NULL)
		return 0;
	if ((rc = ecs_call(d, "DescribeTaskDefinition", json_pack("{s:s}", "taskDefinition", arn), &out, em)) != 0)
		return rc;
	*td = json_object_get(out, "taskDefinition");
	if (!json_is_object(*td)) {
		json_decref(out);
		return err_set(em, DP_EREMOTE, "ecs:DescribeTaskDefinition of %s: the answer has no taskDefinition", arn);
	}
	json_object_set(d->tds, arn, *td);
	json_decref(out);
	return 0;
}

static json_t *named(const json_t *list, const char *name)
{
	size_t i;
	json_t *v;

	json_array_foreach(list, i, v) {
		if (eq(js(v, "name"), name))
			return v;
	}
	return NULL;
}

/* The agent's port: its diag-http mapping, else its first. */
static int agent_port(const json_t *def)
{
	const json_t *pm = json_object_get(def, "portMappings"), *m = named(pm, "diag-http");
	json_int_t p;

	if (m == NULL)
		m = json_array_get(pm, 0);
	p = json_integer_value(json_object_get(m, "containerPort"));
	return p > 0 && p < 65536 ? (int)p : FLEET_AGENT_PORT;
}

/* Does the agent listen on loopback only (injected without a token: "--urls http://127.0.0.1:52323")? */
static bool loopback_only(const json_t *def)
{
	const char *u = fleet_agent_urls(json_object_get(def, "command"), NULL);

	if (u == NULL)
		return false;
	u += fleet_urls_https(u) ? 8 : strncmp(u, "http://", 7) == 0 ? 7 : 0;
	return strncmp(u, "127.", 4) == 0 || strncmp(u, "localhost", 9) == 0 || strncmp(u, "[::1]", 5) == 0;
}

/* The mode the app containers were injected with: their DOTNET_DiagnosticPorts entry for our socket. */
static const char *app_mode(const json_t *defs)
{
	size_t i, k;
	json_t *c, *e;

	json_array_foreach(defs, i, c) {
		if (eq(js(c, "name"), AGENT))
			continue;
		json_array_foreach(json_object_get(c, "environment"), k, e) {
			const char *v = js(e, "value"), *p;

			if (!eq(js(e, "name"), "DOTNET_DiagnosticPorts") || v == NULL)
				continue;
			if ((p = strstr(v, SOCKET ",")) != NULL) {
				char *entry = mem_strndup(p, strcspn(p, ";"));
				bool nosuspend = strstr(entry, ",nosuspend") != NULL;

				free(entry);
				return nosuspend ? "nosuspend" : "suspend"; /* suspend: the runtime's default */
			}
		}
	}
	return NULL;
}

/* The task's own address (awsvpc), private or public; NULL when it has none. */
static const char *address(const json_t *task, bool public_ip)
{
	const char *want = public_ip ? "publicIPv4Address" : "privateIPv4Address";
	size_t i, k;
	json_t *a, *det, *c, *ni;

	json_array_foreach(json_object_get(task, "attachments"), i, a) {
		if (!eq(js(a, "type"), "ElasticNetworkInterface") && !eq(js(a, "type"), "eni"))
			continue;
		json_array_foreach(json_object_get(a, "details"), k, det) {
			if (eq(js(det, "name"), want) && js(det, "value"))
				return js(det, "value");
		}
	}
	if (public_ip)
		return NULL; /* containers[].networkInterfaces has private addresses only */
	json_array_foreach(json_object_get(task, "containers"), i, c) {
		json_array_foreach(json_object_get(c, "networkInterfaces"), k, ni) {
			if (js(ni, "privateIpv4Address"))
				return js(ni, "privateIpv4Address");
			if (js(ni, "ipv6Address"))
				return js(ni, "ipv6Address");
		}
	}
	return NULL;
}

/* The agent's token secret: the valueFrom of DIAGPORT_AUTH_TOKEN, or NULL. */
static const char *token_ref(const json_t *def)
{
	return js(named(json_object_get(def, "secrets"), "DIAGPORT_AUTH_TOKEN"), "valueFrom");
}

/* Fill a from task and its definition: everything but the token. */
static void describe_agent(struct disc *d, const json_t *task, const json_t *td, struct fleet_agent *a)
{
	const json_t *defs = json_object_get(td, "containerDefinitions"), *def = named(defs, AGENT);
	const json_t *run = named(json_object_get(task, "containers"), AGENT);
	const char *group = js(task, "group"), *mode = js(td, "networkMode"), *ip, *why, *scheme;
	bool v6 = false;
	const char *id = last_part(js(task, "taskArn"));

	a->name = mem_printf("%s/%s", d->cluster, id);
	a->cluster = mem_strdup(d->cluster);
	a->task = mem_strdup(id);
	if (group && strncmp(group, "service:", 8) == 0) {
		a->service = mem_strdup(group + 8);
		a->workload = mem_printf("%s/%s", d->cluster, group);
	}
	if (def == NULL) {
		a->why_not = mem_strdup("not injected");
		return;
	}
	a->port = agent_port(def);
	a->mode = app_mode(defs) ? mem_strdup(app_mode(defs)) : NULL;
	if (mode == NULL)
		mode = eq(js(task, "launchType"), "FARGATE") ? "awsvpc" : "bridge"; /* ECS's default on EC2 */
	if (eq(mode, "bridge") || eq(mode, "host")) {
		a->why_not = mem_printf("%s network mode: the task has no address of its own (use --target with the "
					"instance's address)", mode);
		return;
	}
	if (run == NULL || !eq(js(run, "lastStatus"), "RUNNING") || eq(js(run, "healthStatus"), "UNHEALTHY")) {
		a->why_not = mem_strdup("agent not ready");
		return;
	}
	if (loopback_only(def)) {
		a->why_not = mem_strdup("the agent listens on loopback only (injected without a token): reach it "
					"with ECS Exec, or inject with a token secret");
		return;
	}
	if ((ip = address(task, d->o->public_ip)) == NULL) {
		a->why_not = mem_strdup(d->o->public_ip
					? "no public address: DescribeTasks reports none for this task (diagport "
					  "does not call ec2:DescribeNetworkInterfaces)"
					: "no address");
		return;
	}
	if ((why = taddr_refusal(ip, d->local, &v6)) != NULL) { /* the token would go there */
		char *s = mem_printf("%.64s%s", ip, strlen(ip) > 64 ? "..." : "");

		for (char *p = s; *p; p++)
			if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
				*p = '?';
		a->why_not = mem_printf("the ECS API gave the address %s, which is not a task's (%s)", s, why);
		free(s);
		return;
	}
	scheme = fleet_urls_https(fleet_agent_urls(json_object_get(def, "command"), NULL)) ? "https" : "http";
	a->url = v6 ? mem_printf("%s://[%s]:%d", scheme, ip, a->port) : mem_printf("%s://%s:%d", scheme, ip, a->port);
}

/* ---- the token ---- */

/* A Secrets Manager reference: ARN[:json-key:version-stage:version-id]. False for anything else (SSM). */
/* An AWS Region's name: eu-west-1, us-gov-west-1, cn-north-1 (letters, '-' between words, a number last). */
static bool region_ok(const char *r)
{
	size_t n = strlen(r), dashes = 0;

	if (n < 4 || n > 32 || !isdigit((unsigned char)r[n - 1]) || !islower((unsigned char)r[0]))
		return false;
	for (size_t i = 0; i < n; i++) {
		if (r[i] == '-' && i > 0 && r[i - 1] != '-')
			dashes++;
		else if (!islower((unsigned char)r[i]) && !isdigit((unsigned char)r[i]))
			return false;
	}
	return dashes >= 2;
}

static bool split_ref(const char *ref, char **arn, char **region, char **key, char **stage, char **version)
{
	const char *f[11];
	size_t n = 0;

	for (const char *p = ref; p && n < 11; p = strchr(p, ':'), p = p ? p + 1 : NULL)
		f[n++] = p;
	if (n < 7 || strncmp(ref, "arn:", 4) != 0 || strncmp(f[2], "secretsmanager:", 15) != 0)
		return false;
#define FIELD(i) (n > (i) ? mem_strndup(f[i], strcspn(f[i], ":")) : mem_strdup(""))
	*arn = mem_strndup(ref, n > 7 ? (size_t)(f[7] - 1 - ref) : strlen(ref));
	*region = FIELD(3);
	*key = FIELD(7);
	*stage = FIELD(8);
	*version = FIELD(9);
#undef FIELD
	return true;
}

static struct secret *get_secret(struct disc *d, const char *arn, const char *region, const char *stage,
				 const char *version)
{
	struct aws_json_call call = { .service = "secretsmanager", .region = region,
				      .target = "secretsmanager.GetSecretValue", .action = "secretsmanager:GetSecretValue" };
	struct secret *s;
	struct aws_error ae;
	struct err_msg em;
	json_t *in, *out = NULL;

	for (size_t i = 0; i < d->nsec; i++)
		if (eq(d->sec[i].id, arn) && eq(d->sec[i].stage, stage) && eq(d->sec[i].version, version))
			return &d->sec[i];
	if (d->nsec == MAX_SECRETS)
		return NULL;
	s = &d->sec[d->nsec++];
	s->id = mem_strdup(arn);
	s->stage = mem_strdup(stage);
	s->version = mem_strdup(version);
	in = json_pack("{s:s}", "SecretId", arn);
	if (*stage)
		json_object_set_new(in, "VersionStage", json_string(stage));
	if (*version)
		json_object_set_new(in, "VersionId", json_string(version));
	call.endpoint = aws_creds_endpoint("SECRETS_MANAGER", "secretsmanager", region);
	memset(&ae, 0, sizeof(ae));
	s->rc = aws_json(&d->c, &call, in, &out, &ae, &em);
	if (s->rc == DP_EAUTH && eq(ae.type, "AccessDeniedException"))
		snprintf(s->why, sizeof(s->why), "the agent needs a token: give --token-file, or "
						 "secretsmanager:GetSecretValue on %s", arn);
	else if (s->rc != 0)
		snprintf(s->why, sizeof(s->why), "the agent's token secret could not be read: %.300s", em.text);
	else if (js(out, "SecretString") == NULL)
		s->rc = DP_EREMOTE, snprintf(s->why, sizeof(s->why), "the agent's token secret %s has no SecretString", arn);
	else
		s->value = mem_strdup(js(out, "SecretString"));
	wipe_json(out);
	json_decref(out);
	json_decref(in);
	free((char *)call.endpoint);
	return s;
}

/* The token from the secret's value (the whole string, or one key of its JSON). NULL with why. */
static char *token_of(const struct secret *s, const char *key, const char *arn, char *why, size_t wn)
{
	json_t *j;
	char *t = NULL;

	if (*key == '\0')
		t = mem_strdup(s->value);
	else if ((j = json_loads(s->value, 0, NULL)) != NULL) {
		if (js(j, key))
			t = mem_strdup(js(j, key));
		wipe_json(j);
		json_decref(j);
	}
	if (t == NULL) {
		snprintf(why, wn, "the agent's token secret %s has no JSON key %s", arn, key);
		return NULL;
	}
	for (const char *p = t; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f) {
			mem_wipe(t, strlen(t));
			free(t);
			snprintf(why, wn, "the agent's token secret %s holds a byte a token cannot have", arn);
			return NULL;
		}
	return t;
}

static void fetch_token(struct disc *d, const json_t *def, struct fleet_agent *a)
{
	char *arn = NULL, *region = NULL, *key = NULL, *stage = NULL, *version = NULL, why[400] = "";
	const char *ref = def ? token_ref(def) : NULL;
	struct secret *s;

	if (ref == NULL || !split_ref(ref, &arn, &region, &key, &stage, &version))
		return; /* no token, or one in SSM Parameter Store: the caller gives it */
	s = *region && !region_ok(region) ? NULL : get_secret(d, arn, *region ? region : d->c.region, stage, version);
	if (*region && !region_ok(region)) /* it becomes a host name: secretsmanager.REGION.amazonaws.com */
		snprintf(why, sizeof(why), "the token secret's ARN names no region (\"%.40s\"): not fetched", region);
	else if (s == NULL)
		snprintf(why, sizeof(why), "too many distinct token secrets (over %d)", MAX_SECRETS);
	else if (s->rc != 0)
		snprintf(why, sizeof(why), "%s", s->why);
	else
		a->token = token_of(s, key, arn, why, sizeof(why));
	if (why[0])
		a->why_not = mem_strdup(why); /* the URL stays: with a token from elsewhere the agent is callable */
	free(arn);
	free(region);
	free(key);
	free(stage);
	free(version);
}

static void disc_free(struct disc *d)
{
	for (size_t i = 0; i < d->nsec; i++) {
		if (d->sec[i].value) {
			mem_wipe(d->sec[i].value, strlen(d->sec[i].value));
			free(d->sec[i].value);
		}
		free(d->sec[i].id);
		free(d->sec[i].stage);
		free(d->sec[i].version);
	}
	json_decref(d->tds);
	free(d->endpoint);
	aws_client_free(&d->c);
}

int fleet_ecs_discover(const struct fleet_ecs_opts *o, struct fleet_set *out, struct err_msg *em)
{
	struct disc d = { .o = o, .tds = json_object() };
	struct fleet_set set = { 0 };
	json_t *arns = json_array(), *tasks = json_array(), *task;
	size_t i;
	int rc;

	if (o->cluster == NULL || *o->cluster == '\0') {
		rc = err_set(em, DP_EINVAL, "no ECS cluster given");
		goto out;
	}
	d.cluster = strncmp(o->cluster, "arn:", 4) == 0 ? last_part(o->cluster) : o->cluster;
	d.c.timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : 10000;
	{
		struct aws_creds_opts co = { .profile = o->profile, .timeout_ms = d.c.timeout_ms };

		if ((rc = aws_creds_load(&co, &d.c.creds, em)) != 0 ||
		    (rc = aws_creds_region(o->region, o->profile, &d.c.region, em)) != 0)
			goto out;
	}
	d.endpoint = aws_creds_endpoint("ECS", "ecs", d.c.region);
	{
		const char *ecs = getenv("AWS_ENDPOINT_URL_ECS"), *all = getenv("AWS_ENDPOINT_URL");

		d.local = (ecs && *ecs) || (all && *all); /* as aws_creds_endpoint chose */
	}
	if ((rc = list_tasks(&d, arns, em)) != 0 || (rc = describe_tasks(&d, arns, tasks, em)) != 0)
		goto out;
	json_array_foreach(tasks, i, task) {
		struct fleet_agent *a;
		json_t *td;

		if (js(task, "taskArn") == NULL || js(task, "taskDefinitionArn") == NULL)
			continue;
		if ((rc = task_def(&d, js(task, "taskDefinitionArn"), &td, em)) != 0)
			goto out;
		a = fleet_set_add(&set);
		describe_agent(&d, task, td, a);
		if (a->why_not == NULL)
			fetch_token(&d, named(json_object_get(td, "containerDefinitions"), AGENT), a);
	}
	if (aws_caller_arn(&d.c, &set.caller, NULL) != 0)
		set.caller = NULL; /* who we are is a courtesy to the agents' logs, not a requirement */
	fleet_set_sort(&set);
	*out = set;
	memset(&set, 0, sizeof(set));
out:
	fleet_set_free(&set);
	json_decref(arns);
	json_decref(tasks);
	disc_free(&d);
	return rc;
}
