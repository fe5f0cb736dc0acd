/*
 * test_inj.c - unit tests of the injector's pieces that are not easily seen
 * through golden files: the status record, option parsing and layering,
 * the crash-dump settings, quantities, CloudFormation tag expansion, and document kind detection.
 */
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "t.h"
#include "doc.h"
#include "injector/inj.h"
#include "injector/inj_int.h"
#include "mem.h"

static void status_roundtrip(void)
{
	struct inj_status st = { .wflags = "VIA", .n = 2 }, back;
	struct inj_opts o;
	struct err_msg em;
	char *text;

	strcpy(st.c[0].name, "app");
	strcpy(st.c[0].flags, "MElm123P");
	strcpy(st.c[1].name, "worker_2");
	strcpy(st.c[1].flags, "Me");
	inj_opts_init(&o);
	o.mode = INJ_SUSPEND;
	text = inj_status_format(&st, &o);
	T_STREQ(text, "v1 mode=suspend flavour=diagport sidecar=native +VIA app:MElm123P worker_2:Me");
	T_CHECK(inj_status_parse(text, &back, &em) == 0);
	T_STREQ(back.wflags, "VIA");
	T_CHECK(back.n == 2);
	T_STREQ(back.c[1].name, "worker_2");
	T_STREQ(back.c[1].flags, "Me");
	free(text);
	T_CHECK(inj_status_parse("v2 +V a:M", &back, &em) == DP_EUNSUPPORTED);
	T_CHECK(inj_status_parse("", &back, &em) == DP_EUNSUPPORTED);
	T_CHECK(inj_status_parse("v1 what", &back, &em) == DP_EUNSUPPORTED);
}

static void options_parse(void)
{
	struct inj_opts o;
	struct err_msg em;

	inj_opts_init(&o);
	T_CHECK(inj_opts_set(&o, "mode", "suspend", &em) == 0 && o.mode == INJ_SUSPEND);
	T_CHECK(inj_opts_set(&o, "mode", "later", &em) == DP_EINVAL);
	T_CHECK(strstr(em.text, "'later' is not nosuspend or suspend") != NULL);
	T_CHECK(inj_opts_set(&o, "port", "0", &em) == DP_EINVAL);
	T_CHECK(inj_opts_set(&o, "port", "65536", &em) == DP_EINVAL);
	T_CHECK(inj_opts_set(&o, "port", "9000", &em) == 0 && o.port == 9000);
	T_CHECK(inj_opts_set(&o, "containers", "a,b-c", &em) == 0);
	T_CHECK(inj_opts_set(&o, "containers", "a,,b", &em) == DP_EINVAL);
	T_CHECK(inj_opts_set(&o, "resources", "cpu=20m,memory=24Mi,memory-limit=1Gi", &em) == 0);
	T_STREQ(o.mem_limit, "1Gi");
	T_CHECK(inj_opts_set(&o, "resources", "gpu=1", &em) == DP_EINVAL);
	T_CHECK(inj_opts_set(&o, "resources", "memory=lots", &em) == DP_EINVAL);
	T_CHECK(inj_opts_set(&o, "flavor", "dotnet-monitor", &em) == 0 && o.flavour == INJ_FLAVOUR_DOTNET_MONITOR);
	T_CHECK(inj_opts_set(&o, "image", "has space", &em) == DP_EINVAL);
	T_CHECK(inj_opts_set(&o, "rules", "arn:aws:ssm:eu-west-1:1:parameter/app/rules", &em) == 0);
	T_STREQ(o.rules, "arn:aws:ssm:eu-west-1:1:parameter/app/rules");
	T_CHECK(inj_opts_set(&o, "rules", "", &em) == DP_EINVAL);
	T_CHECK(strstr(em.text, "option rules") != NULL);
	for (size_t i = 0; i < INJ_NSOURCES; i++) { /* the sources table reads the option's own field */
		struct inj_opts copy;

		if (strcmp(inj_sources[i].option, "rules") != 0)
			continue;
		inj_opts_copy(&copy, &o);
		T_CHECK(copy.rules != o.rules);
		T_STREQ(inj_source_value(&inj_sources[i], &copy), o.rules);
		T_CHECK(inj_source_value(&inj_sources[i], &copy) == copy.rules);
		inj_opts_free(&copy);
	}
	T_CHECK(inj_opts_set(&o, "nonsense", "x", &em) == DP_ENOTFOUND);
	inj_opts_free(&o);
}

/*
 * The options table of docs/INJECTION.md is the table in opts.c, as
 * inj_opts_markdown writes it, between its two marker comments. On a
 * difference the expected table is written to build/options-table.md.
 */
static void docs_options_table(void)
{
	static const char begin[] = "<!-- options table: written by inj_opts_markdown (injector/opts_text.c) -->\n",
			  end[] = "<!-- end of options table -->";
	struct buf doc, want;
	struct err_msg em;
	const char *a, *b;
	FILE *f;

	buf_init(&doc, 1 << 20);
	buf_init(&want, 0);
	T_CHECK(buf_read_path(&doc, "docs/INJECTION.md", NULL, &em) == 0);
	inj_opts_markdown(&want);
	T_CHECK((a = strstr(doc.data, begin)) != NULL);
	a += strlen(begin);
	T_CHECK((b = strstr(a, end)) != NULL);
	if ((size_t)(b - a) != want.len || memcmp(a, want.data, want.len) != 0) {
		if ((f = fopen("build/options-table.md", "w")) != NULL) {
			fputs(want.data, f);
			fclose(f);
		}
		T_FAIL("docs/INJECTION.md's options table differs from injector/opts.c's (the table it should be: "
		       "build/options-table.md)");
	}
	buf_free(&doc);
	buf_free(&want);
}

/*
 * crash-dumps: each type is the runtime's DbgMiniDumpType value, the four
 * settings are what the runtime reads, a container's own setting is seen
 * under either prefix, and the record names a type that is not the default.
 */
static void crash_dumps(void)
{
	static const char *const types[] = { "off", "mini", "heap", "triage", "full" };
	static const char settings[] = "crash-dumps: heap\nenforce:\n  crash-dumps: off\n  ptrace: no\n";
	struct doc_node *ann = t_doc("diagport.dev/crash-dumps: off\n");
	struct inj_status st = { .wflags = "V", .n = 1 };
	struct inj_settings set;
	struct inj_opts o, own;
	struct err_msg em;
	char *text;

	inj_opts_init(&o);
	T_CHECK(o.crash_dumps == 1); /* on by default, mini */
	T_STREQ(inj_crash_value(&o, 1), "1");
	for (int t = 0; t < 5; t++) {
		T_CHECK(inj_opts_set(&o, "crash-dumps", types[t], &em) == 0 && o.crash_dumps == t);
		T_STREQ(inj_crash_type(t), types[t]);
	}
	T_STREQ(inj_crash_value(&o, 1), "4");
	T_CHECK(inj_opts_set(&o, "crash-dumps", "2", &em) == DP_EINVAL);
	T_CHECK(strstr(em.text, "'2' is not off, mini, heap, triage or full") != NULL);
	T_CHECK(inj_opts_set(&o, "crash-dumps", "Mini", &em) == DP_EINVAL);
	T_CHECK(inj_opts_set(&o, "crash-dumps", "false", &em) == 0 && o.crash_dumps == 0); /* YAML 1.1's bare off */
	T_CHECK(inj_opts_set(&o, "crash-dumps", "true", &em) == DP_EINVAL);
	T_CHECK(inj_opts_set(&o, "crash-dumps", "full", &em) == 0);
	T_STREQ(inj_crash_names[0], "DbgEnableMiniDump");
	T_STREQ(inj_crash_value(&o, 0), "1");
	T_STREQ(inj_crash_value(&o, 2), "/dumps/crash-%p-%t-%e.dmp");
	T_STREQ(inj_crash_value(&o, 3), "1");
	T_CHECK(inj_crash_name("DOTNET_DbgEnableMiniDump", 24));
	T_CHECK(inj_crash_name("COMPlus_EnableCrashReport", 25));
	T_CHECK(inj_crash_name("DOTNET_DbgMiniDumpName=/x", 22)); /* a Compose "K=V" item, by its name's length */
	T_CHECK(!inj_crash_name("DOTNET_DbgMiniDumpNames", 23));
	T_CHECK(!inj_crash_name("DbgEnableMiniDump", 17));
	T_CHECK(!inj_crash_name("DOTNET_", 7));
	T_CHECK(!inj_crash_name("DOTNET_DiagnosticPorts", 22));
	strcpy(st.c[0].name, "app");
	strcpy(st.c[0].flags, "ECmM");
	text = inj_status_format(&st, &o);
	T_STREQ(text, "v1 mode=nosuspend flavour=diagport sidecar=native crash-dumps=full +V app:ECmM");
	free(text);
	/* a bare off (a YAML 1.1 boolean) in the platform's settings and in a workload's own */
	T_CHECK(inj_settings_parse(settings, strlen(settings), "t.yaml", &set, &em) == 0);
	T_CHECK(set.opts.crash_dumps == 2 && set.enforce.v.crash_dumps == 0 && !set.enforce.v.ptrace);
	inj_settings_free(&set);
	T_CHECK(ann != NULL && inj_opts_from_map(NULL, &o, ann, true, "annotation ", "Pod p", &own, &em) == 0);
	T_CHECK(own.crash_dumps == 0);
	inj_opts_free(&own);
	doc_free(ann);
	T_CHECK(inj_opts_set(&o, "crash-dumps", "mini", &em) == 0);
	text = inj_status_format(&st, &o);
	T_STREQ(text, "v1 mode=nosuspend flavour=diagport sidecar=native +V app:ECmM");
	free(text);
	inj_opts_free(&o);
}

static void options_layering(void)
{
	struct inj_opts base, o;
	struct inj_report rep = { 0 };
	struct inj_ctx c = { .file = "f.yaml", .report = &rep };
	struct err_msg em;
	struct doc_node *ann = t_doc("{\"diagport.dev/mode\": \"suspend\", \"other\": \"x\", \"diagport.dev/port\": \"7000\", "
				     "\"diagport.dev/ptrace\": \"false\"}");

	T_CHECK(ann != NULL);
	inj_opts_init(&base);
	T_CHECK(inj_opts_set_flag(&base, "image", "cli/image:1", &em) == 0);
	T_CHECK(inj_opts_set_flag(&base, "port", "6000", &em) == 0);
	T_CHECK(inj_opts_set_flag(&base, "mode", "suspend", &em) == 0);
	T_CHECK(inj_opts_set_flag(&base, "ptrace", "false", &em) == 0);
	c.base = &base;
	T_CHECK(inj_opts_from_map(&c, &base, ann, true, "annotation ", "Pod p", &o, &em) == 0);
	T_CHECK(o.mode == INJ_SUSPEND);   /* from the annotation */
	T_CHECK(o.port == 7000);          /* annotation over command line */
	T_STREQ(o.image, "cli/image:1");  /* command line kept where the workload is silent */
	/* one warning: the port the flag gave lost; mode and ptrace agree with their flags */
	T_CHECK(rep.nwarn == 1);
	if (rep.nwarn == 1)
		T_STREQ(rep.warnings[0], "f.yaml:1:69: Pod p: annotation diagport.dev/port=7000 wins over --port 6000");
	inj_opts_free(&o);
	inj_report_free(&rep);
	doc_free(ann);
	/* a flag without a value is named as typed */
	ann = t_doc("{\"diagport.dev/ptrace\": \"true\"}");
	T_CHECK(inj_opts_from_map(&c, &base, ann, true, "annotation ", "Pod p", &o, &em) == 0);
	T_CHECK(rep.nwarn == 1 && strstr(rep.warnings[0], "diagport.dev/ptrace=true wins over --no-ptrace") != NULL);
	inj_opts_free(&o);
	inj_report_free(&rep);
	doc_free(ann);
	ann = t_doc("{\"diagport.dev/port\": \"x\"}");
	T_CHECK(inj_opts_from_map(&c, &base, ann, true, "annotation ", "Pod p", &o, &em) == DP_EREFUSED);
	T_CHECK(strstr(em.text, "f.yaml:1:") == em.text);
	T_CHECK(strstr(em.text, "Pod p: diagport.dev/port: option port") != NULL);
	doc_free(ann);
	inj_opts_free(&base);
	inj_report_free(&rep);
}

/* The platform's policy: enforced values win, with a warning only for what was asked; captures is a ceiling. */
static void policy_enforce(void)
{
	struct inj_policy p;
	struct inj_opts base, o;
	struct inj_report rep = { 0 };
	struct inj_ctx c = { .file = "f.yaml", .report = &rep, .policy = &p };
	struct err_msg em;
	struct doc_node *ann = t_doc("{\"diagport.dev/auth\": \"none\", \"diagport.dev/captures\": \"dump,stacks\"}");

	inj_policy_init(&p);
	T_CHECK(inj_policy_set(&p, "auth", "required", &em) == 0);
	T_CHECK(inj_policy_set(&p, "ptrace", "false", &em) == 0);
	T_CHECK(inj_policy_set(&p, "captures", "stacks,metrics,cpuprofile", &em) == 0);
	T_CHECK(inj_policy_set(&p, "auth", "maybe", &em) == DP_EINVAL && strstr(em.text, "option auth: 'maybe'"));
	T_CHECK(inj_policy_set(&p, "captures", "heap", &em) == DP_EINVAL && strstr(em.text, "'heap' is not a capture kind"));
	T_CHECK(inj_policy_set(&p, "containers", "a", &em) == DP_EINVAL && strstr(em.text, "cannot be enforced"));
	T_CHECK(inj_policy_set(&p, "nope", "a", &em) == DP_ENOTFOUND);
	T_CHECK(inj_policy_set(&p, "crash-dumps", "huge", &em) == DP_EINVAL && strstr(em.text, "option crash-dumps"));
	inj_opts_init(&base);
	c.base = &base;
	T_CHECK(inj_opts_from_map(&c, &base, ann, true, "annotation ", "Pod p", &o, &em) == 0);
	T_CHECK(inj_opts_enforce(&c, &o, "Pod p", &em) == 0);
	T_CHECK(!o.no_auth && !o.ptrace);
	T_CHECK(o.captures == (1u << 7)); /* stacks: the pod's list within the platform's */
	/* ptrace was not asked for (a default): enforced silently; auth and captures were */
	T_CHECK(rep.nwarn == 2);
	if (rep.nwarn == 2) {
		T_STREQ(rep.warnings[0], "f.yaml: Pod p: the platform's policy enforces auth=required, the workload asked for auth=none");
		T_STREQ(rep.warnings[1], "f.yaml: Pod p: the platform's policy allows captures=cpuprofile,metrics,stacks, the "
			"workload asked for captures=dump,stacks: the agent serves stacks");
	}
	inj_opts_free(&o);
	inj_report_free(&rep);
	doc_free(ann);
	/* crash-dumps enforced off: the workload's heap loses, with a warning */
	T_CHECK(inj_policy_set(&p, "crash-dumps", "off", &em) == 0);
	ann = t_doc("{\"diagport.dev/crash-dumps\": \"heap\"}");
	T_CHECK(inj_opts_from_map(&c, &base, ann, true, "annotation ", "Pod p", &o, &em) == 0 && o.crash_dumps == 2);
	T_CHECK(inj_opts_enforce(&c, &o, "Pod p", &em) == 0 && o.crash_dumps == 0);
	T_CHECK(rep.nwarn == 1 && strstr(rep.warnings[0], "the platform's policy enforces crash-dumps=off, the workload "
					 "asked for crash-dumps=heap") != NULL);
	inj_opts_free(&o);
	inj_report_free(&rep);
	doc_free(ann);
	/* nothing in common: refused, not an agent that serves nothing */
	ann = t_doc("{\"diagport.dev/captures\": \"dump\"}");
	T_CHECK(inj_opts_from_map(&c, &base, ann, true, "annotation ", "Pod p", &o, &em) == 0);
	T_CHECK(inj_opts_enforce(&c, &o, "Pod p", &em) == DP_EREFUSED && strstr(em.text, "no kind in common"));
	inj_opts_free(&o);
	doc_free(ann);
	inj_report_free(&rep);
	inj_opts_free(&base);
	inj_policy_free(&p);
}

static void quantities(void)
{
	long long v;

	T_CHECK(inj_quantity("64Mi", false, &v) == 0 && v == 64LL << 20);
	T_CHECK(inj_quantity("1Gi", false, &v) == 0 && v == 1LL << 30);
	T_CHECK(inj_quantity("100M", false, &v) == 0 && v == 100000000);
	T_CHECK(inj_quantity("10m", true, &v) == 0 && v == 10);
	T_CHECK(inj_quantity("0.5", true, &v) == 0 && v == 500);
	T_CHECK(inj_quantity("2", true, &v) == 0 && v == 2000);
	T_CHECK(inj_quantity("-1", false, &v) != 0);
	T_CHECK(inj_quantity("1Zi", false, &v) != 0);
	T_CHECK(inj_quantity("", false, &v) != 0);
}

static void cfn_tags(void)
{
	struct doc_node *n = t_doc("a: !Ref X\nb: !GetAtt Role.Arn\nc: !If [C, !Sub 'x-${Y}', 2]\nd: !Condition Z\n");
	struct buf out;
	struct err_msg em;

	T_CHECK(n != NULL);
	T_CHECK(inj_cfn_expand_tags(n, "t", &em) == 0);
	buf_init(&out, 0);
	T_CHECK(doc_write_json(&out, n, 0, &em) == 0);
	T_STREQ(out.data, "{\"a\":{\"Ref\":\"X\"},\"b\":{\"Fn::GetAtt\":[\"Role\",\"Arn\"]},"
			  "\"c\":{\"Fn::If\":[\"C\",{\"Fn::Sub\":\"x-${Y}\"},2]},\"d\":{\"Condition\":\"Z\"}}");
	buf_free(&out);
	doc_free(n);
	n = t_doc("a: !GetAtt NoDot\n");
	T_CHECK(inj_cfn_expand_tags(n, "t", &em) == DP_ESYNTAX);
	T_CHECK(strstr(em.text, "expected LogicalId.Attribute") != NULL);
	doc_free(n);
}

static void detect(void)
{
	struct doc_node *k = t_doc("{\"apiVersion\":\"v1\",\"kind\":\"Pod\"}");
	struct doc_node *e = t_doc("{\"family\":\"f\",\"containerDefinitions\":[]}");
	struct doc_node *d = t_doc("{\"taskDefinition\":{\"containerDefinitions\":[]}}");
	struct doc_node *f = t_doc("Resources:\n  A:\n    Type: AWS::S3::Bucket\n");
	struct doc_node *x = t_doc("hello: world\n");

	T_STREQ(inj_detect(k), "k8s");
	T_STREQ(inj_detect(e), "ecs");
	T_STREQ(inj_detect(d), "ecs");
	T_STREQ(inj_detect(f), "cfn");
	T_CHECK(inj_detect(x) == NULL);
	doc_free(k);
	doc_free(e);
	doc_free(d);
	doc_free(f);
	doc_free(x);
}

static void intrinsic(void)
{
	struct doc_node *n = t_doc("a: !Sub x\nb: {\"Fn::If\": [c, 1, 2]}\nc: {\"Ref\": x, \"other\": 1}\nd: !!str 12\n");

	T_STREQ(inj_intrinsic(doc_get(n, "a")), "!Sub");
	T_STREQ(inj_intrinsic(doc_get(n, "b")), "Fn::If");
	T_CHECK(inj_intrinsic(doc_get(n, "c")) == NULL);
	T_CHECK(inj_intrinsic(doc_get(n, "d")) == NULL);
	doc_free(n);
}

int main(void)
{
	mem_install();
	T_BEGIN("inj");
	T_RUN(status_roundtrip);
	T_RUN(options_parse);
	T_RUN(docs_options_table);
	T_RUN(crash_dumps);
	T_RUN(options_layering);
	T_RUN(policy_enforce);
	T_RUN(quantities);
	T_RUN(cfn_tags);
	T_RUN(detect);
	T_RUN(intrinsic);
	T_END();
}
