/*
 * test_settings.c - the settings binder (common/settings.c): paths put and
 * replaced case-insensitively with their sources, the typed getters and the
 * marks they leave, lists, and the refusals: the full path, the source, and
 * the name a misspelling most likely meant.
 */
#include <stdlib.h>

#include "mem.h"
#include "settings.h"
#include "t.h"

static struct settings_node *tree(void)
{
	struct settings_node *t = settings_new();
	struct err_msg em;
	static const char *const kv[][3] = {
		{ "Egress:S3Storage:s3:BucketName", "b1", "a.yaml:4:7" },
		{ "egress:s3storage:S3:bucketname", "b2", "environment variable DOTNETMONITOR_Egress__S3Storage__s3__BucketName" },
		{ "Limits:Count", "7", "a.yaml:9:3" },
		{ "Limits:Ratio", "0.5", "a.yaml:10:3" },
		{ "Limits:On", "TRUE", "a.yaml:11:3" },
		{ "Limits:Window", "00:01:30", "a.yaml:12:3" },
		{ "Paths:1", "/b", "a.yaml:14:5" },
		{ "Paths:0", "/a", "a.yaml:13:5" },
	};

	for (size_t i = 0; i < sizeof(kv) / sizeof(kv[0]); i++)
		if (settings_put(t, kv[i][0], kv[i][1], kv[i][2], 0, &em) != 0)
			T_FAIL("%s", em.text);
	return t;
}

/* A later put of the same path in any case replaces the value and its source; the first spelling stays. */
static void put_replaces(void)
{
	struct settings_node *t = tree(), *n = settings_at(t, "EGRESS:s3storage:s3:BUCKETNAME", false);
	struct err_msg em;
	char path[128];

	T_CHECK(n != NULL);
	T_STREQ(n->value, "b2");
	T_STREQ(n->where, "environment variable DOTNETMONITOR_Egress__S3Storage__s3__BucketName");
	settings_path(n, path, sizeof(path));
	T_STREQ(path, "Egress:S3Storage:s3:BucketName");
	T_CHECK(!n->used); /* settings_at without mark reads nothing */
	T_CHECK(settings_put(t, "Egress::x", "v", "w", 0, &em) == DP_EINVAL);
	T_CHECK(strstr(em.text, "empty part") != NULL);
	T_CHECK(settings_put(t, "Egress:", "v", "w", 0, &em) == DP_EINVAL);
	T_CHECK(settings_put(t, "A:B:C", "v", "w", 3, &em) == DP_ETOOBIG); /* the node cap */
	settings_free(t);
	/* the cap counts the root and every node put, whatever the source: 4 allows A, A:B, A:C and no more */
	t = settings_new();
	T_CHECK(settings_put(t, "A:B", "v", "w", 4, &em) == 0);
	T_CHECK(settings_put(t, "a:c", "v", "w", 4, &em) == 0);
	T_CHECK(settings_put(t, "A:B", "v2", "w2", 4, &em) == 0); /* a replaced value adds no node */
	T_CHECK(settings_put(t, "A:D", "v", "w", 4, &em) == DP_ETOOBIG);
	T_CHECK(t->total == 3);
	settings_free(t);
}

/* Each getter reads its type, marks the node, and refuses a bad value by full path and source. */
static void typed_getters(void)
{
	struct settings_node *t = tree(), *lim = settings_get(t, "Limits");
	struct err_msg em;
	unsigned u = 0;
	double d = 0;
	bool b = false, has = false;
	long long ms = 0;
	char *s = NULL;

	T_CHECK(settings_uint(lim, "count", &has, &u, 1, 10, &em) == 0 && has && u == 7);
	T_CHECK(settings_double(lim, "Ratio", &has, &d, 0, 1, &em) == 0 && d == 0.5);
	T_CHECK(settings_bool(lim, "On", &b, &em) == 0 && b);
	T_CHECK(settings_timespan(lim, "Window", &has, &ms, 1000, 3600000, &em) == 0 && ms == 90000);
	T_CHECK(settings_str(lim, "Count", true, &s, &em) == 0);
	T_STREQ(s, "7");
	free(s);
	has = false;
	T_CHECK(settings_uint(lim, "Absent", &has, &u, 1, 10, &em) == 0 && !has);
	T_CHECK(settings_uint(lim, "Count", &has, &u, 1, 5, &em) == DP_EINVAL);
	T_STREQ(em.text, "a.yaml:9:3: Limits:Count: '7' is not a whole number in 1..5");
	T_CHECK(settings_timespan(lim, "Window", &has, &ms, 1000, 60000, &em) == DP_EINVAL);
	T_CHECK(strstr(em.text, "a.yaml:12:3: Limits:Window: '00:01:30' is outside 00:00:01..00:01:00") == em.text);
	T_CHECK(settings_text(t, "Limits", false, &(const char *){ NULL }, &em) == DP_EINVAL); /* a section */
	T_CHECK(strstr(em.text, "takes a value, not settings under it") != NULL);
	T_CHECK(settings_text(lim, "Needed", true, &(const char *){ NULL }, &em) == DP_EINVAL);
	T_CHECK(strstr(em.text, "Limits:Needed: is required") != NULL);
	T_CHECK(settings_parse_timespan("1.02:03:04") == ((26 * 60 + 3) * 60 + 4) * 1000LL);
	T_CHECK(settings_parse_timespan("00:60:00") == -1);
	T_CHECK(settings_unread(lim, NULL, &em) == 0); /* every child read */
	settings_free(t);
}

/* A list: its items in index order whatever order they came in; a gap or a non-number refused. */
static void lists(void)
{
	struct settings_node *t = tree();
	struct err_msg em;
	char **v = NULL;
	size_t n = 0;

	T_CHECK(settings_strings(t, "Paths", &v, &n, &em) == 0 && n == 2);
	T_STREQ(v[0], "/a");
	T_STREQ(v[1], "/b");
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
	T_CHECK(settings_put(t, "Paths:5", "/f", "a.yaml:15:5", 0, &em) == 0);
	T_CHECK(settings_strings(t, "Paths", &v, &n, &em) == DP_EINVAL);
	T_STREQ(em.text, "a.yaml:15:5: Paths:5: a list's items are numbered 0 to 2");
	settings_free(t);
}

/* What nobody read is refused by full path and source, with the name asked for beside it that it misspells. */
static void refusal_and_suggestion(void)
{
	struct settings_node *t = settings_new(), *s3;
	struct err_msg em;
	const char *v;

	T_CHECK(settings_put(t, "Egress:S3Storage:s3:BuketName", "b", "rules.yaml:4:7", 0, &em) == 0);
	T_CHECK(settings_put(t, "Egress:S3Storage:s3:RegionName", "r", "rules.yaml:5:7", 0, &em) == 0);
	s3 = settings_at(t, "Egress:S3Storage:s3", true);
	T_CHECK(settings_text(s3, "BucketName", false, &v, &em) == 0 && v == NULL);
	T_CHECK(settings_text(s3, "RegionName", false, &v, &em) == 0 && v != NULL);
	T_CHECK(settings_check_unread(t, &em) == DP_EINVAL);
	T_STREQ(em.text, "Egress:S3Storage:s3:BuketName (rules.yaml:4:7): unknown setting; did you mean BucketName?");
	T_CHECK(settings_unread(s3, "BucketName, RegionName", &em) == DP_EINVAL); /* a section's own refusal */
	T_STREQ(em.text, "rules.yaml:4:7: Egress:S3Storage:s3:BuketName: not a setting diagport knows here; did you mean "
			 "BucketName?");
	/* far from every name: refused without a guess */
	T_CHECK(settings_put(t, "Egress:S3Storage:s3:Colour", "red", "environment variable X", 0, &em) == 0);
	settings_get(s3, "BuketName");
	T_CHECK(settings_check_unread(t, &em) == DP_EINVAL);
	T_STREQ(em.text, "Egress:S3Storage:s3:Colour (environment variable X): unknown setting");
	/* a misspelt section: the whole path named, by its first setting, the section's name suggested */
	T_CHECK(settings_put(t, "Egres:FileSystem:x:DirectoryPath", "/d", "--flag", 0, &em) == 0);
	settings_mark(settings_find(s3, "Colour"));
	T_CHECK(settings_check_unread(t, &em) == DP_EINVAL);
	T_STREQ(em.text, "Egres:FileSystem:x:DirectoryPath (--flag): unknown setting; did you mean Egress?");
	settings_mark(settings_find(t, "Egres"));
	T_CHECK(settings_check_unread(t, &em) == 0);
	/* a swap of two letters is one edit; a short name takes one edit at most */
	T_CHECK(settings_put(t, "Egress:S3Storage:s3:Ab", "x", "w", 0, &em) == 0);
	settings_ask(s3, "Xy");
	T_CHECK(settings_suggest(settings_find(s3, "Ab")) == NULL);
	settings_ask(s3, "Ba");
	T_STREQ(settings_suggest(settings_find(s3, "Ab")), "Ba");
	T_CHECK(settings_nearest_child(s3, "RegoinName") == settings_find(s3, "RegionName"));
	settings_free(t);
}

/* A key refused at once (settings_refuse_unknown): the suggestion at the first level nobody asked for. */
static void unknown_at_once(void)
{
	struct settings_node *t = settings_new();
	struct err_msg em;

	T_CHECK(settings_put(t, "DiagnostcPort:EndpointName", "/s", "environment variable DIAGPORT_X", 0, &em) == 0);
	settings_ask_path(t, "DiagnosticPort:EndpointName");
	settings_ask_path(t, "Metrics:Enabled");
	T_CHECK(settings_refuse_unknown(DP_ENOTFOUND, settings_at(t, "DiagnostcPort:EndpointName", false), &em) ==
		DP_ENOTFOUND);
	T_STREQ(em.text, "DiagnostcPort:EndpointName (environment variable DIAGPORT_X): unknown setting; did you mean "
			 "DiagnosticPort?");
	T_CHECK(settings_put(t, "Metrics:Enabeld", "false", "f:1:10", 0, &em) == 0);
	settings_ask_path(t, "Metrics:Enabled");
	T_CHECK(settings_refuse_unknown(DP_ENOTFOUND, settings_at(t, "Metrics:Enabeld", false), &em) == DP_ENOTFOUND);
	T_STREQ(em.text, "Metrics:Enabeld (f:1:10): unknown setting; did you mean Enabled?");
	settings_free(t);
}

/* Values are wiped in place (secrets handed on); the tree frees what it holds. */
static void wipe(void)
{
	struct settings_node *t = tree();

	settings_wipe(settings_find(t, "Egress"));
	T_CHECK(settings_at(t, "Egress:S3Storage:s3:BucketName", false)->value[0] == '\0');
	T_STREQ(settings_at(t, "Limits:Count", false)->value, "7");
	settings_free(t);
	settings_free(NULL);
}

int main(void)
{
	t_file_name = "test_settings";
	mem_install();
	T_RUN(put_replaces);
	T_RUN(typed_getters);
	T_RUN(lists);
	T_RUN(refusal_and_suggestion);
	T_RUN(unknown_at_once);
	T_RUN(wipe);
	return t_failed_cases ? 1 : 0;
}
