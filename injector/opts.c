/*
 * opts.c - the injection options: one table (inj_options[] below) read the
 * same way from command-line flags, Kubernetes annotations (diagport.dev/NAME),
 * ECS tags, CloudFormation Metadata.diagport and the webhook's
 * configuration, and written out as --help and as the docs' table
 * (opts_text.c). A workload's own options are read by opts_map.c, the
 * platform's policy applied by opts_policy.c. See inj.h for the layering.
 */
#include "opts_int.h"

#include <ctype.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "mem.h"

void inj_opts_init(struct inj_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->inject = -1;
	o->mode = INJ_NOSUSPEND;
	o->port = INJ_DEFAULT_PORT;
	o->sidecar = INJ_SIDECAR_NATIVE;
	o->flavour = INJ_FLAVOUR_DIAGPORT;
	o->captures = INJ_CAPTURE_ALL;
	o->crash_dumps = INJ_CRASH_DEFAULT;
}

static char *dup_or_null(const char *s)
{
	return s ? mem_strdup(s) : NULL;
}

void inj_opts_copy(struct inj_opts *dst, const struct inj_opts *src)
{
	*dst = *src;
	dst->containers = dup_or_null(src->containers);
	dst->image = dup_or_null(src->image);
	dst->cpu_request = dup_or_null(src->cpu_request);
	dst->mem_request = dup_or_null(src->mem_request);
	dst->mem_limit = dup_or_null(src->mem_limit);
	dst->dumps_limit = dup_or_null(src->dumps_limit);
	dst->auth_secret = dup_or_null(src->auth_secret);
	dst->tls_secret = dup_or_null(src->tls_secret);
	dst->egress_settings = dup_or_null(src->egress_settings);
	dst->rules = dup_or_null(src->rules);
}

void inj_opts_free(struct inj_opts *o)
{
	if (o == NULL)
		return;
	mem_free(o->containers);
	mem_free(o->image);
	mem_free(o->cpu_request);
	mem_free(o->mem_request);
	mem_free(o->mem_limit);
	mem_free(o->dumps_limit);
	mem_free(o->auth_secret);
	mem_free(o->tls_secret);
	mem_free(o->egress_settings);
	mem_free(o->rules);
	inj_opts_init(o);
}

/*
 * The options, one row each. Every reader works from this table: the
 * command line (cli.c builds its getopt table and --help from it), the
 * workload's annotations, ECS tags and CloudFormation Metadata
 * (inj_opts_from_map, inj_opts_from_tags), the webhook's configuration
 * file, and the options table of docs/INJECTION.md (inj_opts_markdown; a
 * unit test fails when the two differ). Adding an option is adding a row,
 * and its effect in the rules.
 */
#define FIELD(f) offsetof(struct inj_opts, f), sizeof(((struct inj_opts *)0)->f)
static const char *const mode_choices[] = { "nosuspend", "suspend", NULL };
static const char *const sidecar_choices[] = { "native", "container", NULL };
static const char *const flavour_choices[] = { "diagport", "dotnet-monitor", NULL };
static const char *const auth_choices[] = { "required", "none", NULL };
/* in the order of the runtime's DbgMiniDumpType values, so a choice's index is the value (off: 0, none) */
static const char *const crash_choices[] = { "off", "mini", "heap", "triage", "full", NULL };

const struct inj_option inj_options[] = {
	{ "inject", NULL, NULL, NULL, NULL, OK_OPTIN, FIELD(inject), NULL, NULL, "`true` / `false`", NULL, "CLI: true; CloudFormation: opt-in", "whether the workload is injected (a workload's `false` opts it out)" },
	{ "mode", NULL, "--mode", NULL, NULL, OK_CHOICE, FIELD(mode), mode_choices, NULL, NULL, NULL, "`nosuspend`", "`suspend`: the app waits at start until the agent has attached it" },
	{ "containers", NULL, "--containers", NULL, NULL, OK_NAMES, FIELD(containers), NULL, NULL, "comma-separated names", "A,B", "every app container", "the app containers to inject" },
	{ "ptrace", NULL, "--ptrace", "--no-ptrace", "false", OK_BOOL, FIELD(ptrace), NULL, NULL, "`true` / `false`", "true|false", "`false`", "add `SYS_PTRACE` to the app containers: dumps need it only from an app that runs as root and is not dumpable, or under Yama's `ptrace_scope` 2 (see \"When SYS_PTRACE is needed\")" },
	{ "image", NULL, "--image", NULL, NULL, OK_REF, FIELD(image), NULL, "an image reference", "image reference", "IMAGE", "`ghcr.io/diagport/diagport:VERSION`", "the agent's image" },
	{ "port", NULL, "--port", NULL, NULL, OK_PORT, FIELD(port), NULL, NULL, "1-65535", "N", "52323", "the agent's HTTP port" },
	{ "resources", NULL, "--resources", NULL, NULL, OK_RESOURCES, 0, 0, NULL, NULL, "`cpu=Q,memory=Q,memory-limit=Q`", "cpu=Q,memory=Q,memory-limit=Q", "`cpu=10m,memory=16Mi,memory-limit=64Mi`", "the agent's requests and memory limit" },
	{ "dumps-size-limit", NULL, "--dumps-size-limit", NULL, NULL, OK_QUANTITY, FIELD(dumps_limit), NULL, NULL, "quantity (`2Gi`)", "Q", "none", "the size limit of the dumps volume" },
	{ "sidecar", NULL, "--sidecar", NULL, NULL, OK_CHOICE, FIELD(sidecar), sidecar_choices, NULL, NULL, NULL, "`native`", "Kubernetes: a native sidecar (1.29+) or a regular container" },
	{ "flavour", "flavor", "--flavour", NULL, NULL, OK_CHOICE, FIELD(flavour), flavour_choices, NULL, NULL, NULL, "`diagport`", "which agent" },
	{ "auth-secret", NULL, "--auth-secret", NULL, NULL, OK_REF, FIELD(auth_secret), NULL, "a Secret name or ARN", "Secret name (k8s) / ARN (ECS, CFN)", "NAME|ARN", "none: loopback only", "the agent's token: with it the agent serves the pod network" },
	{ "tls-secret", NULL, "--tls-secret", NULL, NULL, OK_REF, FIELD(tls_secret), NULL, "a Secret name or ARN", "`kubernetes.io/tls` Secret name (k8s) / ARN (ECS, CFN) / project secret (Compose)", "NAME|ARN", "none: `http://`", "serve the agent's port with TLS (`https://`) with this certificate and key: a `kubernetes.io/tls` Secret (k8s), a secret holding both as PEM (ECS, CFN, Compose)" },
	{ "egress-settings", NULL, "--egress-settings", NULL, NULL, OK_REF, FIELD(egress_settings), NULL, "a Secret name or ARN", "Secret name (k8s) / ARN (ECS, CFN)", "NAME|ARN", "none", "the agent's egress providers (S3, Azure Blob): a Secret of key-per-file settings (k8s), a secret holding a settings document (ECS)" },
	{ "rules", NULL, "--rules", NULL, NULL, OK_REF, FIELD(rules), NULL, "a ConfigMap name, SSM parameter or Compose config", "ConfigMap name (k8s) / SSM parameter name or ARN (ECS, CFN) / config name (Compose)", "NAME|ARN", "none", "the agent's collection rules (dotnet-monitor's `CollectionRules`): a ConfigMap of key-per-file settings (k8s), an SSM parameter holding a settings document (ECS), a project config holding a settings file (Compose)" },
	{ "auth", NULL, NULL, "--no-auth", "none", OK_CHOICE, FIELD(no_auth), auth_choices, NULL, NULL, NULL, "`required`", "serve the pod network without a token (`none`; never the default)" },
	{ "perf", NULL, NULL, "--perf", "true", OK_BOOL, FIELD(perf), NULL, NULL, "`true` / `false`", NULL, "`false`", "Kubernetes: what the agent's perf CPU profiles need (`shareProcessNamespace`, `PERFMON` for the agent, which Pod Security baseline and restricted refuse); ECS, CloudFormation and Compose refuse it" },
	{ "captures", NULL, "--captures", NULL, NULL, OK_CAPTURES, FIELD(captures), NULL, NULL, "comma-separated kinds (`dump`, `gcdump`, `trace`, `cpuprofile`, `stacks`, `metrics`, `logs`, `env`, `exceptions`), or `all`", "LIST", "`all`", "the capture kinds the agent serves (its `--captures`, sorted and deduplicated); the platform's `enforce` list is the most a workload may serve" },
	{ "crash-dumps", NULL, "--crash-dumps", NULL, NULL, OK_CHOICE, FIELD(crash_dumps), crash_choices, NULL, NULL, NULL, "`mini`", "when an app crashes, the runtime writes a dump of this type and a crash report into the dumps volume (see \"Crash dumps\"); `mini` fits any dumps-size-limit: it grows with the app's threads, not its heap" },
};
#define N_OPTIONS (sizeof(inj_options) / sizeof(inj_options[0]))

const char *inj_crash_type(int t)
{
	return t >= 0 && t <= 4 ? crash_choices[t] : "?";
}
const size_t inj_n_options = N_OPTIONS;

static void replace(char **slot, const char *v)
{
	mem_free(*slot);
	*slot = mem_strdup(v);
}

static int parse_bool(const char *v, bool *out)
{
	if (strcmp(v, "true") == 0 || strcmp(v, "True") == 0 || strcmp(v, "TRUE") == 0) {
		*out = true;
		return 0;
	}
	if (strcmp(v, "false") == 0 || strcmp(v, "False") == 0 || strcmp(v, "FALSE") == 0) {
		*out = false;
		return 0;
	}
	return DP_EINVAL;
}

bool inj_name_ok(const char *s, size_t len)
{
	if (len == 0 || len > 255)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
			return false;
	return true;
}

static int set_containers(struct inj_opts *o, const char *v, struct err_msg *em)
{
	const char *p = v;

	if (*v == '\0')
		return err_set(em, DP_EINVAL, "option containers: empty list");
	while (*p) {
		size_t n = strcspn(p, ",");

		if (!inj_name_ok(p, n))
			return err_set(em, DP_EINVAL,
				       "option containers: '%.*s' is not a container name (expected a comma-separated list of names)",
				       (int)n, p);
		p += n;
		if (*p == ',')
			p++;
	}
	replace(&o->containers, v);
	return 0;
}

static int set_resources(struct inj_opts *o, const char *v, struct err_msg *em)
{
	char *copy = mem_strdup(v), *save = NULL;
	int rc = 0;

	unsigned seen = 0;

	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');
		long long q;
		unsigned bit;

		if (eq == NULL) {
			rc = err_set(em, DP_EINVAL, "option resources: '%s' is not KEY=QUANTITY (keys: cpu, memory, memory-limit)", tok);
			break;
		}
		*eq = '\0';
		bool cpu = strcmp(tok, "cpu") == 0;
		if (inj_quantity(eq + 1, cpu, &q) != 0 || q <= 0) {
			rc = err_set(em, DP_EINVAL, "option resources: %s=%s is not a Kubernetes quantity (e.g. cpu=10m, memory=16Mi)", tok, eq + 1);
			break;
		}
		bit = cpu ? 1u : strcmp(tok, "memory") == 0 ? 2u : strcmp(tok, "memory-limit") == 0 ? 4u : 0u;
		if (bit & seen) {
			rc = err_set(em, DP_EINVAL, "option resources: %s is given twice", tok);
			break;
		}
		seen |= bit;
		if (cpu)
			replace(&o->cpu_request, eq + 1);
		else if (strcmp(tok, "memory") == 0)
			replace(&o->mem_request, eq + 1);
		else if (strcmp(tok, "memory-limit") == 0)
			replace(&o->mem_limit, eq + 1);
		else {
			rc = err_set(em, DP_EINVAL, "option resources: unknown key '%s' (keys: cpu, memory, memory-limit)", tok);
			break;
		}
	}
	mem_free(copy);
	return rc;
}

static const char *const capture_kinds[] = INJ_CAPTURE_KINDS;
_Static_assert(sizeof(capture_kinds) / sizeof(capture_kinds[0]) == INJ_N_CAPTURES, "INJ_N_CAPTURES");

void inj_captures_text(unsigned captures, char sep, char *out, size_t n)
{
	size_t k = 0;

	out[0] = '\0';
	if ((captures & INJ_CAPTURE_ALL) == INJ_CAPTURE_ALL) {
		snprintf(out, n, "all");
		return;
	}
	for (unsigned i = 0; i < INJ_N_CAPTURES && k + 1 < n; i++) {
		if (!(captures & (1u << i)))
			continue;
		if (k)
			out[k++] = sep;
		k += (size_t)snprintf(out + k, n - k, "%s", capture_kinds[i]);
	}
}

/* "dump,stacks" (also "dump+stacks", "dump stacks": an ECS tag value holds no comma), or "all". */
static int parse_captures(const char *v, unsigned *out, struct err_msg *em)
{
	unsigned set = 0;
	const char *p = v;

	if (*v == '\0')
		return err_set(em, DP_EINVAL, "option captures: empty list (expected capture kinds, or all)");
	for (;;) {
		size_t n = strcspn(p, ",+ ");
		unsigned bit = 0;

		if (n == 3 && strncmp(p, "all", 3) == 0)
			bit = INJ_CAPTURE_ALL;
		for (unsigned i = 0; i < INJ_N_CAPTURES && !bit; i++)
			if (strlen(capture_kinds[i]) == n && strncmp(p, capture_kinds[i], n) == 0)
				bit = 1u << i;
		if (bit == 0)
			return err_set(em, DP_EINVAL,
				       "option captures: '%.*s' is not a capture kind (expected a comma-separated list of dump, "
				       "gcdump, trace, cpuprofile, stacks, metrics, logs, env and exceptions, or all)", (int)n, p);
		set |= bit;
		p += n;
		if (*p == '\0')
			break;
		p++;
	}
	*out = set;
	return 0;
}

/* "a or b", "a, b or c": the choices for a message. */
static void choices_text(const char *const *c, char *out, size_t n)
{
	size_t k = 0, count = 0;

	while (c[count])
		count++;
	out[0] = '\0';
	for (size_t i = 0; i < count && k < n; i++)
		k += (size_t)snprintf(out + k, n - k, "%s%s", i == 0 ? "" : i + 1 == count ? " or " : ", ", c[i]);
}

static void set_int(void *field, size_t size, int v)
{
	if (size == sizeof(bool)) {
		bool b = v != 0;

		memcpy(field, &b, sizeof(b));
	} else {
		memcpy(field, &v, sizeof(v));
	}
}

int inj_option_set(struct inj_opts *o, const struct inj_option *opt, const char *v, struct err_msg *em)
{
	void *field = (char *)o + opt->off;
	char list[128];
	bool b = false;
	long long q;

	switch (opt->kind) {
	case OK_CHOICE:
		for (int i = 0; opt->choices[i]; i++)
			if (strcmp(v, opt->choices[i]) == 0) {
				set_int(field, opt->size, i);
				return 0;
			}
		/* a choice "off" is also "false": YAML 1.1 reads a bare off (crash-dumps: off) as a boolean */
		if (opt->choices[0] && strcmp(opt->choices[0], "off") == 0 && strcmp(v, "false") == 0) {
			set_int(field, opt->size, 0);
			return 0;
		}
		choices_text(opt->choices, list, sizeof(list));
		return err_set(em, DP_EINVAL, "option %s: '%s' is not %s", opt->name, v, list);
	case OK_OPTIN:
		if (strcmp(v, "enabled") == 0 || strcmp(v, "disabled") == 0)
			b = strcmp(v, "enabled") == 0;
		else if (parse_bool(v, &b) != 0)
			return err_set(em, DP_EINVAL, "option %s: '%s' is not true, false, enabled or disabled",
				       opt->name, v);
		set_int(field, opt->size, b);
		return 0;
	case OK_BOOL:
		if (parse_bool(v, &b) != 0)
			return err_set(em, DP_EINVAL, "option %s: '%s' is not true or false", opt->name, v);
		set_int(field, opt->size, b);
		return 0;
	case OK_PORT: {
		char *end;
		long p = strtol(v, &end, 10);

		if (*v == '\0' || *end != '\0' || p < 1 || p > 65535)
			return err_set(em, DP_EINVAL, "option %s: '%s' is not a port number (1-65535)", opt->name, v);
		set_int(field, opt->size, (int)p);
		return 0;
	}
	case OK_NAMES:
		return set_containers(o, v, em);
	case OK_REF:
		if (*v == '\0' || strpbrk(v, " \t\r\n\"'") != NULL)
			return err_set(em, DP_EINVAL, "option %s: '%s' is not %s", opt->name, v, opt->noun);
		replace((char **)field, v);
		return 0;
	case OK_QUANTITY:
		if (inj_quantity(v, false, &q) != 0 || q <= 0)
			return err_set(em, DP_EINVAL, "option %s: '%s' is not a Kubernetes quantity (e.g. 2Gi)", opt->name, v);
		replace((char **)field, v);
		return 0;
	case OK_RESOURCES:
		return set_resources(o, v, em);
	case OK_CAPTURES: {
		unsigned set = 0;
		int rc = parse_captures(v, &set, em);

		if (rc == 0)
			memcpy(field, &set, sizeof(set));
		return rc;
	}
	}
	return DP_EINTERNAL;
}

const struct inj_option *inj_option_find(const char *name)
{
	for (size_t i = 0; i < N_OPTIONS; i++)
		if (strcmp(name, inj_options[i].name) == 0 || (inj_options[i].alias && strcmp(name, inj_options[i].alias) == 0))
			return &inj_options[i];
	return NULL;
}

int inj_opts_set(struct inj_opts *o, const char *name, const char *v, struct err_msg *em)
{
	const struct inj_option *opt = inj_option_find(name);

	if (opt == NULL)
		return err_set(em, DP_ENOTFOUND, "unknown option '%s' (options: %s)", name, inj_opts_names());
	return inj_option_set(o, opt, v, em);
}

_Static_assert(N_OPTIONS <= sizeof(unsigned) * 8, "struct inj_opts' flagged has a bit per option");

int inj_opts_set_flag(struct inj_opts *o, const char *name, const char *v, struct err_msg *em)
{
	const struct inj_option *opt = inj_option_find(name);
	int rc = inj_opts_set(o, name, v, em);

	if (rc == 0)
		o->flagged |= 1u << (unsigned)(opt - inj_options);
	return rc;
}

static int get_int(const void *field, size_t size)
{
	bool b;
	int v;

	if (size == sizeof(bool)) {
		memcpy(&b, field, sizeof(b));
		return b;
	}
	memcpy(&v, field, sizeof(v));
	return v;
}

void inj_option_text(const struct inj_option *opt, const struct inj_opts *o, struct buf *out)
{
	const void *field = (const char *)o + opt->off;
	const char *const res[][2] = { { "cpu", o->cpu_request }, { "memory", o->mem_request },
				       { "memory-limit", o->mem_limit } };
	const char *sep = "";

	switch (opt->kind) {
	case OK_CHOICE:
		buf_printf(out, "%s", opt->choices[get_int(field, opt->size)]);
		return;
	case OK_BOOL:
	case OK_OPTIN:
		buf_printf(out, "%s", get_int(field, opt->size) ? "true" : "false");
		return;
	case OK_PORT:
		buf_printf(out, "%d", get_int(field, opt->size));
		return;
	case OK_RESOURCES:
		for (size_t i = 0; i < sizeof(res) / sizeof(res[0]); i++)
			if (res[i][1]) {
				buf_printf(out, "%s%s=%s", sep, res[i][0], res[i][1]);
				sep = ",";
			}
		return;
	case OK_NAMES:
	case OK_REF:
	case OK_QUANTITY:
		buf_printf(out, "%s", *(char *const *)field ? *(char *const *)field : "");
		return;
	case OK_CAPTURES: {
		char t[128];

		inj_captures_text(o->captures, ',', t, sizeof(t));
		buf_puts(out, t);
		return;
	}
	}
}

int inj_opts_set_own(const struct inj_ctx *c, struct inj_opts *o, const char *name, const char *v,
		     const char *setting, const char *key, const struct doc_node *at, const char *what,
		     struct err_msg *em)
{
	const struct inj_option *opt = inj_option_find(name);
	unsigned bit = opt ? 1u << (unsigned)(opt - inj_options) : 0;
	struct buf was, now;
	char pos[64] = "";
	int rc;

	if (!(o->flagged & bit)) {
		if ((rc = inj_opts_set(o, name, v, em)) == 0)
			o->own |= bit;
		return rc;
	}
	buf_init(&was, 0);
	buf_init(&now, 0);
	inj_option_text(opt, o, &was);
	if ((rc = inj_option_set(o, opt, v, em)) != 0)
		goto out;
	o->flagged &= ~bit;
	o->own |= bit;
	inj_option_text(opt, o, &now);
	if (c && c->report && strcmp(was.data ? was.data : "", now.data ? now.data : "") != 0) {
		bool as_switch = opt->switch_flag && strcmp(was.data ? was.data : "", opt->switch_value) == 0;

		if (at && at->line)
			snprintf(pos, sizeof(pos), ":%u:%u", at->line, at->col);
		/* the flag as it was typed: --mode suspend, --no-ptrace */
		inj_report_warn(c->report, "%s%s: %s%s%s%s=%s wins over %s%s%s", c->file ? c->file : "<input>", pos,
				what ? what : "", what ? ": " : "", setting, key, v,
				as_switch ? opt->switch_flag : opt->flag ? opt->flag : opt->switch_flag,
				as_switch ? "" : " ", as_switch ? "" : (was.data ? was.data : ""));
	}
out:
	buf_free(&was);
	buf_free(&now);
	return rc;
}

static char names_buf[512];

static void names_init(void)
{
	size_t k = 0;

	for (size_t i = 0; i < N_OPTIONS && k < sizeof(names_buf); i++)
		k += (size_t)snprintf(names_buf + k, sizeof(names_buf) - k, "%s%s", i ? ", " : "", inj_options[i].name);
}

const char *inj_opts_names(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, names_init);
	return names_buf;
}

size_t inj_flags(struct inj_flag *out, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; i < N_OPTIONS && n + 3 <= max; i++) {
		const struct inj_option *opt = &inj_options[i];

		if (opt->flag)
			out[n++] = (struct inj_flag){ opt->flag + 2, true, opt->name, NULL };
		if (opt->flag && opt->alias)
			out[n++] = (struct inj_flag){ opt->alias, true, opt->name, NULL };
		if (opt->switch_flag)
			out[n++] = (struct inj_flag){ opt->switch_flag + 2, false, opt->name, opt->switch_value };
	}
	return n;
}

int inj_opts_check(const struct inj_ctx *c, const struct inj_opts *o, const char *what, struct err_msg *em)
{
	if (o->auth_secret && o->no_auth)
		return inj_fail(c, em, NULL, DP_EREFUSED, what,
				"auth-secret and auth=none contradict each other; give one");
	if (o->flavour == INJ_FLAVOUR_DOTNET_MONITOR && o->perf)
		return inj_fail(c, em, NULL, DP_EREFUSED, what,
				"perf with flavour dotnet-monitor: dotnet-monitor has no perf_event_open profiler, and "
				"perf would give it PERFMON and the app's processes for nothing; use the diagport agent "
				"or leave perf out");
	if (o->flavour == INJ_FLAVOUR_DOTNET_MONITOR && o->captures != INJ_CAPTURE_ALL)
		return inj_fail(c, em, NULL, DP_EREFUSED, what,
				"captures with flavour dotnet-monitor: dotnet-monitor has no setting that limits the "
				"capture kinds it serves; use the diagport agent, or leave captures at all");
	if (o->flavour == INJ_FLAVOUR_DOTNET_MONITOR && !o->auth_secret && !o->no_auth)
		return inj_fail(c, em, NULL, DP_EREFUSED, what,
				"flavour dotnet-monitor serves the pod network and needs authentication: "
				"name a Secret with its API key (auth-secret, keys Subject and PublicKey) "
				"or turn authentication off explicitly (auth=none / --no-auth)");
	return 0;
}

/*
 * Kubernetes quantities, the subset people write for containers: a decimal
 * number with an optional suffix (m, k, M, G, T, Ki, Mi, Gi, Ti, or an
 * exponent). Memory comes back in bytes, cpu in millicores.
 */
int inj_quantity(const char *s, bool cpu, long long *out)
{
	char *end;
	double v;
	double mul = 1;

	if (s == NULL || *s == '\0' || !(isdigit((unsigned char)*s) || *s == '.'))
		return DP_EINVAL;
	v = strtod(s, &end);
	if (end == s)
		return DP_EINVAL;
	if (*end == '\0')
		mul = 1;
	else if (strcmp(end, "m") == 0)
		mul = 1e-3;
	else if (strcmp(end, "k") == 0)
		mul = 1e3;
	else if (strcmp(end, "M") == 0)
		mul = 1e6;
	else if (strcmp(end, "G") == 0)
		mul = 1e9;
	else if (strcmp(end, "T") == 0)
		mul = 1e12;
	else if (strcmp(end, "Ki") == 0)
		mul = 1024.0;
	else if (strcmp(end, "Mi") == 0)
		mul = 1024.0 * 1024;
	else if (strcmp(end, "Gi") == 0)
		mul = 1024.0 * 1024 * 1024;
	else if (strcmp(end, "Ti") == 0)
		mul = 1024.0 * 1024 * 1024 * 1024;
	else
		return DP_EINVAL;
	v *= mul;
	if (cpu)
		v *= 1000;
	if (v < 0 || v > 9e18)
		return DP_EINVAL;
	*out = (long long)(v + 0.999999);
	return 0;
}
