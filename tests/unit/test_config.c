/*
 * test_config.c - the agent's settings (launcher/config*.c): the file, the
 * environment, sizes, dotnet-monitor's names, egress providers, and messages
 * that say where a bad value is.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../launcher/config.h"
#include "mem.h"
#include "size.h"
#include "t.h"

static char dir[] = "/tmp/dp-config-XXXXXX";

/* Write text to dir/name; returns the path (static buffer). */
static const char *file_with(const char *name, const char *text)
{
	static char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	fputs(text, f);
	fclose(f);
	return path;
}

static void sizes(void)
{
	uint64_t v = 0;

	T_CHECK(size_parse("4096", &v) == 0 && v == 4096);
	T_CHECK(size_parse("2Gi", &v) == 0 && v == 2ULL << 30);
	T_CHECK(size_parse("512Mi", &v) == 0 && v == 512ULL << 20);
	T_CHECK(size_parse("100M", &v) == 0 && v == 100000000ULL);
	T_CHECK(size_parse("0", &v) == 0 && v == 0);
	T_CHECK(size_parse("1.5Gi", &v) == DP_EINVAL);
	T_CHECK(size_parse("-1", &v) == DP_EINVAL);
	T_CHECK(size_parse("12XB", &v) == DP_EINVAL);
	T_CHECK(size_parse("", &v) == DP_EINVAL);
	T_CHECK(size_parse("99999999999999999999", &v) == DP_EINVAL);
	T_CHECK(size_parse("20000000Ti", &v) == DP_EINVAL); /* overflows 64 bits */
}

static void yaml_file_both_vocabularies(void)
{
	struct launch_config c = { 0 };
	struct err_msg em;
	const char *p = file_with("a.yaml", "socket: /diag/port\n"
					    "urls: http://127.0.0.1:1234\n"
					    "dumpsLimit: 1Gi\n"
					    "dumpTransport: fifo\n"
					    "noAuth: true\n"
					    "Storage:\n  DumpTempFolder: /scratch\n"
					    "egress:\n  fileSystem:\n    shared:\n      directoryPath: /artifacts\n"
					    "      IntermediateDirectoryPath: /artifacts/.tmp\n");

	T_CHECK(config_load_file(&c, p, &em) == 0);
	T_STREQ(c.socket, "/diag/port");
	T_STREQ(c.urls, "http://127.0.0.1:1234");
	T_STREQ(c.dumps, "/scratch");
	T_STREQ(c.dump_transport, "fifo");
	T_CHECK(c.no_auth);
	T_CHECK(c.dumps_limit == 1ULL << 30);
	T_CHECK(c.n_egress == 1);
	T_STREQ(c.egress[0].name, "shared");
	T_STREQ(c.egress[0].dir, "/artifacts");
	T_STREQ(c.egress[0].tmp_dir, "/artifacts/.tmp");
	config_free(&c);
}

static void json_settings_file(void)
{
	struct launch_config c = { 0 };
	struct err_msg em;
	const char *p = file_with("settings.json", "{\"Urls\": \"http://+:52323\", \"DiagnosticPort\": "
						   "{\"ConnectionMode\": \"Listen\", \"EndpointName\": \"/diag/dotnet-monitor.sock\"}}");

	T_CHECK(config_load_file(&c, p, &em) == 0);
	T_STREQ(c.urls, "http://+:52323");
	T_STREQ(c.socket, "/diag/dotnet-monitor.sock");
	config_free(&c);
}

static void errors_say_where(void)
{
	struct launch_config c = { 0 };
	struct err_msg em;
	const char *p = file_with("bad.yaml", "urls: http://127.0.0.1:1\ndumpsLimit: lots\n");

	T_CHECK(config_load_file(&c, p, &em) == DP_EINVAL);
	T_CHECK(strstr(em.text, "bad.yaml:2:13") != NULL);
	T_CHECK(strstr(em.text, "dumpsLimit") != NULL && strstr(em.text, "'lots'") != NULL);
	config_free(&c);

	p = file_with("unknown.yaml", "# comment\nsokcet: /diag/port\n");
	T_CHECK(config_load_file(&c, p, &em) == DP_ENOTFOUND);
	T_CHECK(strstr(em.text, "unknown.yaml:2:9") != NULL && strstr(em.text, "sokcet") != NULL);
	config_free(&c);

	p = file_with("syntax.yaml", "urls: [a,\n");
	T_CHECK(config_load_file(&c, p, &em) == DP_ESYNTAX);
	T_CHECK(strstr(em.text, "syntax.yaml:") != NULL);
	config_free(&c);

	p = file_with("list.yaml", "urls:\n  - a\n");
	T_CHECK(config_load_file(&c, p, &em) == DP_EINVAL && strstr(em.text, "not a list") != NULL);
	config_free(&c);

	p = file_with("mode.yaml", "DiagnosticPort:\n  ConnectionMode: Connect\n");
	T_CHECK(config_load_file(&c, p, &em) == DP_EINVAL && strstr(em.text, "always listens") != NULL);
	config_free(&c);

	p = file_with("gcs.yaml", "Egress:\n  GoogleCloudStorage:\n    x:\n      bucket: b\n");
	T_CHECK(config_load_file(&c, p, &em) == DP_EINVAL && strstr(em.text, "GoogleCloudStorage") != NULL &&
		strstr(em.text, "gcs.yaml:4:15") != NULL);
	config_free(&c);

	T_CHECK(config_load_file(&c, "/nonexistent/x.yaml", &em) == DP_EIO);
	T_CHECK(strstr(em.text, "/nonexistent/x.yaml") != NULL);
}

static int warned;
static void count_warning(const char *line)
{
	(void)line;
	warned++;
}

static void environment(void)
{
	struct launch_config c = { 0 };
	struct err_msg em;
	char *env[] = { "DIAGPORT_URLS=http://127.0.0.1:9", "DOTNETMONITOR_Urls=http://+:52323",
			"DOTNETMONITOR_DiagnosticPort__EndpointName=/diag/port",
			"DOTNETMONITOR_Egress__FileSystem__out__DirectoryPath=/out",
			"DOTNETMONITOR_Metrics__MetricCount=3", "DIAGPORT_DUMPS_LIMIT=64Mi", "DIAGPORT_AUTH_TOKEN=secret-0123456789abcdef",
			"DIAGPORT_CONFIG=/x", "DIAGPORT_NO_AUTH=", "PATH=/bin", NULL };

	warned = 0;
	T_CHECK(config_load_env(&c, env, count_warning, &em) == 0);
	T_STREQ(c.urls, "http://127.0.0.1:9"); /* diagport's own name wins over dotnet-monitor's */
	T_STREQ(c.socket, "/diag/port");
	T_CHECK(c.dumps_limit == 64ULL << 20);
	T_CHECK(!c.no_auth); /* empty = unset */
	T_CHECK(c.n_egress == 1 && strcmp(c.egress[0].dir, "/out") == 0);
	T_CHECK(warned == 1); /* Metrics__MetricCount: not ours, warned and skipped */
	config_free(&c);

	{
		char *bad[] = { "DIAGPORT_DUMP_TRANSPORT=pigeon", NULL };

		T_CHECK(config_load_env(&c, bad, NULL, &em) == DP_EINVAL);
		T_CHECK(strstr(em.text, "DIAGPORT_DUMP_TRANSPORT") != NULL && strstr(em.text, "pigeon") != NULL);
		config_free(&c);
	}
	{
		char *staged[] = { "DIAGPORT_DUMP_TRANSPORT=staged", NULL };

		T_CHECK(config_load_env(&c, staged, NULL, &em) == 0);
		T_STREQ(c.dump_transport, "staged");
		config_free(&c);
	}
	{
		char *typo[] = { "DIAGPORT_SOKCET=/x", NULL };

		T_CHECK(config_load_env(&c, typo, NULL, &em) == DP_ENOTFOUND);
		T_CHECK(strstr(em.text, "DIAGPORT_SOKCET") != NULL);
		config_free(&c);
	}
}

/* metricsStartDelay: 0 is a value (no delay), not "unset"; the message names the setting as documented */
static void metrics_settings(void)
{
	struct launch_config c = { 0 };
	struct err_msg em;
	char *env[] = { "DIAGPORT_METRICS_START_DELAY=0", "DOTNETMONITOR_GlobalCounter__IntervalSeconds=2", NULL };
	char *bad[] = { "DIAGPORT_METRICS_START_DELAY=3601", NULL };

	T_CHECK(!c.metrics_delay_set);
	T_CHECK(config_load_env(&c, env, NULL, &em) == 0);
	T_CHECK(c.metrics_delay_set && c.metrics_delay_s == 0);
	T_CHECK(c.metrics_interval_s == 2);
	T_CHECK(config_set(&c, "metricsstartdelay", "3600", "test", &em) == 0 && c.metrics_delay_s == 3600);
	T_CHECK(config_set(&c, "metricsStartDelay", "-1", "test", &em) == DP_EINVAL);
	T_CHECK(config_set(&c, "metricsStartDelay", "", "test", &em) == DP_EINVAL);
	T_CHECK(config_load_env(&c, bad, NULL, &em) == DP_EINVAL);
	T_CHECK(strstr(em.text, "DIAGPORT_METRICS_START_DELAY: metricsStartDelay takes a whole number of seconds "
				"from 0 to 3600, not '3601'") != NULL);
	T_CHECK(c.metrics_delay_s == 3600); /* the refused value changed nothing */
	config_free(&c);
}

/* The https certificate under dotnet-monitor's (Kestrel's) names and diagport's: file, environment, key-per-file;
 * the key's password wiped from the environment once read */
static void tls_settings(void)
{
	struct launch_config c = { 0 };
	struct err_msg em;
	static const char yaml[] = "Kestrel:\n  Certificates:\n    Default:\n      Path: /f/tls.crt\n"
				   "      KeyPath: /f/tls.key\n";
	char pw[] = "DOTNETMONITOR_Kestrel__Certificates__Default__Password=hunter2";
	char *env[] = { "DOTNETMONITOR_Kestrel__Certificates__Default__Path=/m/tls.crt", "DIAGPORT_TLS_KEY=/d/tls.key", pw,
			NULL };
	char d[300], f[400];
	FILE *fp;

	T_CHECK(config_load_text(&c, yaml, sizeof(yaml) - 1, "agent.yaml", &em) == 0);
	T_STREQ(c.tls_cert, "/f/tls.crt");
	T_STREQ(c.tls_key, "/f/tls.key");
	T_CHECK(config_load_env(&c, env, NULL, &em) == 0);
	T_STREQ(c.tls_cert, "/m/tls.crt");
	T_STREQ(c.tls_key, "/d/tls.key");
	T_STREQ(c.tls_password, "hunter2");
	T_CHECK(strstr(pw, "hunter2") == NULL); /* wiped: not left in /proc/PID/environ */
	snprintf(d, sizeof(d), "%s/tls-kpf", dir);
	T_CHECK(mkdir(d, 0700) == 0);
	snprintf(f, sizeof(f), "%s/Kestrel__Certificates__Default__KeyPath", d);
	T_CHECK((fp = fopen(f, "w")) != NULL && fputs("/s/tls.key\n", fp) >= 0 && fclose(fp) == 0);
	T_CHECK(config_load_dir(&c, d, NULL, &em) == 0);
	T_STREQ(c.tls_key, "/s/tls.key");
	T_CHECK(config_set(&c, "kestrel:certificates:default:path", "", "test", &em) == DP_EINVAL);
	config_free(&c);
}

/* tlsPem: the text itself, from the environment (wiped once read, refused or not), a file or key-per-file; its
 * source kept for messages; at most 64 KiB, the size told and never the text; not with the files' settings */
static void tls_pem_setting(void)
{
	struct launch_config c = { 0 };
	struct err_msg em;
	char pem[] = "DIAGPORT_TLS_PEM=-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----";
	char *env[] = { pem, NULL };
	char *big = mem_zalloc(17 + CONFIG_MAX_PEM + 2), *benv[] = { big, NULL };

	T_CHECK(config_load_env(&c, env, NULL, &em) == 0);
	T_STREQ(c.tls_pem, "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----");
	T_STREQ(c.tls_pem_where, "environment variable DIAGPORT_TLS_PEM");
	T_CHECK(strstr(pem, "BEGIN") == NULL && strcmp(pem, "DIAGPORT_TLS_PEM=") == 0); /* wiped in place */
	T_CHECK(config_check(&c, &em) == 0);
	T_CHECK(config_set(&c, "Kestrel:Certificates:Default:KeyPath", "/k", "agent.yaml:4:16", &em) == 0);
	T_CHECK(config_check(&c, &em) == DP_EINVAL);
	T_STREQ(em.text, "tlsPem (environment variable DIAGPORT_TLS_PEM) and Kestrel:Certificates:Default:KeyPath (tlsKey) "
		"(agent.yaml:4:16) are both set: give the certificate and key as PEM text in tlsPem (unencrypted) or as "
		"files, not both");
	config_free(&c);
	T_CHECK(config_set(&c, "TLSPEM", "x", "f.yaml:1:9", &em) == 0);
	T_STREQ(c.tls_pem_where, "f.yaml:1:9");
	T_CHECK(config_set(&c, "tlsPem", "", "g", &em) == DP_EINVAL && strstr(em.text, "g: tlsPem is empty"));
	T_STREQ(c.tls_pem_where, "f.yaml:1:9"); /* a refused value changes nothing */
	memcpy(big, "DIAGPORT_TLS_PEM=", 17);
	memset(big + 17, 'k', CONFIG_MAX_PEM + 1);
	T_CHECK(config_load_env(&c, benv, NULL, &em) == DP_ETOOBIG);
	T_STREQ(em.text, "environment variable DIAGPORT_TLS_PEM: tlsPem is larger than 65536 bytes; it takes the "
		"certificate chain and the private key in PEM");
	T_CHECK(big[17] == '\0'); /* wiped though refused */
	T_STREQ(c.tls_pem, "x");
	big[17 + CONFIG_MAX_PEM] = '\0';
	memset(big + 17, 'k', CONFIG_MAX_PEM);
	T_CHECK(config_set(&c, "tlsPem", big + 17, "h", &em) == 0 && strlen(c.tls_pem) == CONFIG_MAX_PEM);
	free(big);
	config_free(&c);
}

static void egress_checks(void)
{
	struct launch_config c = { 0 };
	struct err_msg em;
	char where[] = "test";

	T_CHECK(config_set(&c, "Egress:FileSystem:a:DirectoryPath", dir, where, &em) == 0);
	T_CHECK(config_check(&c, &em) == 0);
	T_CHECK(config_set(&c, "Egress:FileSystem:a:IntermediateDirectoryPath", "/proc", where, &em) == 0);
	T_CHECK(config_check(&c, &em) == DP_EINVAL && strstr(em.text, "different filesystems") != NULL);
	config_free(&c);
	T_CHECK(config_set(&c, "Egress:FileSystem:b:IntermediateDirectoryPath", dir, where, &em) == 0);
	T_CHECK(config_check(&c, &em) == DP_EINVAL && strstr(em.text, "no DirectoryPath") != NULL);
	config_free(&c);
	T_CHECK(config_set(&c, "Egress:FileSystem:c:DirectoryPath", "/nonexistent-dir", where, &em) == 0);
	T_CHECK(config_check(&c, &em) == DP_EINVAL && strstr(em.text, "/nonexistent-dir") != NULL);
	config_free(&c);
	T_CHECK(config_set(&c, "Egress:FileSystem:bad/name:DirectoryPath", dir, where, &em) == DP_EINVAL);
	T_CHECK(config_set(&c, "Egress:FileSystem:x:Colour", dir, where, &em) == DP_EINVAL);
	T_CHECK(config_set(&c, "Egress:FileSystem:x", dir, where, &em) == DP_EINVAL);
	config_free(&c);
}

/* A store provider's setting key (its node in the settings tree), or NULL. */
static const struct settings_node *store_key(const struct launch_config *c, size_t i, const char *key)
{
	return settings_at(c->egress[i].set, key, false);
}

/* Store providers: their settings kept as given (with where), names unique across types, types named. */
static void store_settings(void)
{
	struct launch_config c = { 0 };
	struct err_msg em;

	T_CHECK(config_set(&c, "Egress:S3Storage:s3:BucketName", "b1", "f:1", &em) == 0);
	T_CHECK(config_set(&c, "egress:s3storage:S3:bucketname", "b2", "f:2", &em) == 0); /* case-insensitive: the same */
	T_CHECK(config_set(&c, "Egress:AzureBlobStorage:az:Metadata:team", "shop", "f:3", &em) == 0);
	T_CHECK(c.n_egress == 2 && c.egress[0].set->n == 1);
	T_STREQ(c.egress[0].type, "S3Storage");
	T_STREQ(store_key(&c, 0, "BucketName")->value, "b2");
	T_STREQ(store_key(&c, 0, "BucketName")->where, "f:2");
	T_STREQ(store_key(&c, 1, "Metadata:team")->value, "shop");
	T_CHECK(config_check(&c, &em) == 0); /* stores are the egress process's to check */
	T_CHECK(config_set(&c, "Egress:FileSystem:s3:DirectoryPath", dir, "f:4", &em) == DP_EINVAL);
	T_CHECK(strstr(em.text, "already a S3Storage provider") != NULL);
	T_CHECK(config_set(&c, "Egress:GoogleCloud:g:Bucket", "x", "f:5", &em) == DP_EINVAL);
	T_CHECK(strstr(em.text, "S3Storage and AzureBlobStorage") != NULL);
	T_CHECK(config_set(&c, "Egress:S3Storage:s3", "x", "f:6", &em) == DP_EINVAL);
	config_free(&c);
}

static int n_ignored;
static void ignored(const char *what)
{
	n_ignored += strstr(what, "Logging__LogLevel__Microsoft") != NULL;
}

/* A key-per-file directory (a mounted Secret: files, ..data, a timestamped directory) and a settings document. */
static void settings_dir_and_document(void)
{
	struct launch_config c = { 0 };
	struct err_msg em;
	char sub[300], link[300];

	{ /* the earlier cases' files: not settings, and refused as such now that only dotnet-monitor's are skipped */
		DIR *d = opendir(dir);
		struct dirent *de;

		T_CHECK(d != NULL);
		while ((de = readdir(d)) != NULL)
			if (de->d_type == DT_REG)
				unlinkat(dirfd(d), de->d_name, 0);
		closedir(d);
	}
	file_with("Egress__S3Storage__s3__BucketName", "bucket-1\n");
	file_with("Urls", "http://127.0.0.1:9\r\n");
	file_with("Logging__LogLevel__Microsoft", "Warning"); /* dotnet-monitor's: warned about, skipped */
	file_with(".hidden", "not: read");
	snprintf(sub, sizeof(sub), "%s/..2026_11_26", dir);
	mkdir(sub, 0755);
	snprintf(link, sizeof(link), "%s/..data", dir);
	T_CHECK(symlink(sub, link) == 0);
	n_ignored = 0;
	T_CHECK(config_load_dir(&c, dir, ignored, &em) == 0);
	T_CHECK(n_ignored == 1);
	T_CHECK(c.n_egress == 1 && c.egress[0].set->n == 1);
	T_STREQ(store_key(&c, 0, "BucketName")->value, "bucket-1");
	T_CHECK(strstr(store_key(&c, 0, "BucketName")->where, "Egress__S3Storage__s3__BucketName") != NULL);
	T_STREQ(c.urls, "http://127.0.0.1:9");
	T_CHECK(config_load_dir(&c, "/nonexistent-dir", ignored, &em) == DP_EIO);
	{
		static const char doc[] = "{\"Egress\": {\"S3Storage\": {\"s3\": {\"BucketName\": \"bucket-2\"}}}}";

		T_CHECK(config_load_text(&c, doc, sizeof(doc) - 1, "DIAGPORT_SETTINGS", &em) == 0);
		T_STREQ(store_key(&c, 0, "BucketName")->value, "bucket-2");
		T_CHECK(config_load_text(&c, "{\"Egress\":", 10, "DIAGPORT_SETTINGS", &em) == DP_ESYNTAX);
		T_CHECK(strncmp(em.text, "DIAGPORT_SETTINGS:1:", 20) == 0);
	}
	config_free(&c);
	/* a name that is not dotnet-monitor's either is refused, by its file, with the name it misspells */
	{
		char d2[] = "/tmp/dp-config-kpf-XXXXXX", f[300];
		FILE *fp;

		T_CHECK(mkdtemp(d2) != NULL);
		snprintf(f, sizeof(f), "%s/Metrics__Enabeld", d2);
		fp = fopen(f, "w");
		T_CHECK(fp != NULL);
		fputs("false\n", fp);
		fclose(fp);
		memset(&c, 0, sizeof(c));
		T_CHECK(config_load_dir(&c, d2, ignored, &em) == DP_ENOTFOUND);
		T_CHECK(strstr(em.text, "Metrics:Enabeld (") == em.text);
		T_CHECK(strstr(em.text, "/Metrics__Enabeld): unknown setting; did you mean Enabled?") != NULL);
		config_free(&c);
		unlink(f);
		rmdir(d2);
	}
}

/* DIAGPORT_ and DOTNETMONITOR_ variables with "__" are hierarchical; a store's secrets are wiped from the
 * environment once read (not left in /proc/PID/environ), other values are left as they were */
static void env_egress_and_secrets(void)
{
	struct launch_config c = { 0 };
	struct err_msg em;
	char v1[] = "DIAGPORT_Egress__S3Storage__s3__BucketName=diag";
	char v2[] = "DIAGPORT_Egress__S3Storage__s3__SecretAccessKey=TOPSECRET";
	char v3[] = "DOTNETMONITOR_Egress__AzureBlobStorage__az__AccountKey=QUJD";
	char v4[] = "DOTNETMONITOR_Egress__Properties__sas=sv=1&sig=SECRETSIG";
	char v5[] = "DIAGPORT_LOG_LEVEL=debug";
	char *env[] = { v1, v2, v3, v4, v5, NULL };

	T_CHECK(config_load_env(&c, env, NULL, &em) == 0);
	T_CHECK(c.n_egress == 2);
	T_STREQ(c.egress[0].type, "AzureBlobStorage"); /* dotnet-monitor's names are read first */
	T_STREQ(c.egress[1].name, "s3");
	T_STREQ(settings_find(egress_properties(&c.egress[1]), "sas")->value, "sv=1&sig=SECRETSIG");
	T_STREQ(store_key(&c, 1, "BucketName")->value, "diag");
	T_STREQ(store_key(&c, 1, "SecretAccessKey")->value, "TOPSECRET");
	T_STREQ(store_key(&c, 1, "SecretAccessKey")->where,
		"environment variable DIAGPORT_Egress__S3Storage__s3__SecretAccessKey");
	T_STREQ(v1, "DIAGPORT_Egress__S3Storage__s3__BucketName=diag");
	T_STREQ(v2, "DIAGPORT_Egress__S3Storage__s3__SecretAccessKey=");
	T_STREQ(v3, "DOTNETMONITOR_Egress__AzureBlobStorage__az__AccountKey=");
	T_STREQ(v4, "DOTNETMONITOR_Egress__Properties__sas=");
	T_STREQ(v5, "DIAGPORT_LOG_LEVEL=debug");
	config_free(&c);
}

/* A key-per-file directory: two files naming one setting (in any letter case), and a file that is not
 * a regular file, are refused by name; a directory in it is skipped */
static void settings_dir_refusals(void)
{
	struct launch_config c = { 0 };
	struct err_msg em;
	char d[] = "/tmp/dp-config-dir-XXXXXX", p[300], q[300];

	T_CHECK(mkdtemp(d) != NULL);
	snprintf(p, sizeof(p), "%s/Egress__S3Storage__s3__BucketName", d);
	snprintf(q, sizeof(q), "%s/egress__s3storage__S3__bucketname", d);
	for (int i = 0; i < 2; i++) {
		FILE *f = fopen(i ? q : p, "w");

		T_CHECK(f != NULL);
		fputs("diag\n", f);
		fclose(f);
	}
	T_CHECK(config_load_dir(&c, d, NULL, &em) == DP_EINVAL);
	T_CHECK(strstr(em.text, "Egress__S3Storage__s3__BucketName") && strstr(em.text, "egress__s3storage__S3__bucketname") &&
		strstr(em.text, "the same setting"));
	config_free(&c);
	T_CHECK(unlink(q) == 0);
	snprintf(q, sizeof(q), "%s/sub", d);
	T_CHECK(mkdir(q, 0755) == 0);
	T_CHECK(config_load_dir(&c, d, NULL, &em) == 0);
	config_free(&c);
	T_CHECK(rmdir(q) == 0);
	snprintf(q, sizeof(q), "%s/Egress__S3Storage__s3__SecretAccessKey", d);
	T_CHECK(symlink("/dev/zero", q) == 0);
	T_CHECK(config_load_dir(&c, d, NULL, &em) == DP_EINVAL);
	T_CHECK(strstr(em.text, "Egress__S3Storage__s3__SecretAccessKey is not a regular file") != NULL);
	config_free(&c);
	T_CHECK(unlink(q) == 0 && symlink("/nonexistent-target", q) == 0);
	T_CHECK(config_load_dir(&c, d, NULL, &em) == DP_EIO);
	T_CHECK(strstr(em.text, "Egress__S3Storage__s3__SecretAccessKey: No such file") != NULL);
	config_free(&c);
	unlink(q);
	unlink(p);
	rmdir(d);
}

/* A settings file copied from a dotnet-monitor deployment: its Logging section (a setting dotnet-monitor has and
 * this agent does not) is said and skipped when the agent warns, a misspelt name beside it still refused. */
static char said[256];
static void keep_warning(const char *line)
{
	warned++;
	snprintf(said, sizeof(said), "%s", line);
}

static void monitor_names_in_a_file(void)
{
	static const char ok[] = "Logging:\n  LogLevel:\n    Default: Warning\n  Console:\n    FormatterName: json\n"
				 "socket: /diag/port\n";
	static const char typo[] = "Storage:\n  DefaultSharedPth: /s\n";
	struct launch_config c = { 0 };
	struct err_msg em;

	warned = 0;
	T_CHECK(config_load_text(&c, ok, sizeof(ok) - 1, "settings.yaml", &em) == DP_ENOTFOUND); /* no warn: refused */
	T_CHECK(strstr(em.text, "Logging:Console:FormatterName") != NULL);
	config_free(&c);
	c = (struct launch_config){ .warn = keep_warning };
	T_CHECK(config_load_text(&c, ok, sizeof(ok) - 1, "settings.yaml", &em) == 0);
	T_CHECK(warned == 1);
	T_STREQ(said, "Logging:Console:FormatterName (settings.yaml:5:20)");
	T_CHECK(c.log_level == LOG_WARN); /* Logging:LogLevel:Default is the agent's own logLevel */
	T_STREQ(c.socket, "/diag/port");
	T_CHECK(config_refuse_unread(&c, &em) == 0);
	config_free(&c);
	c = (struct launch_config){ .warn = keep_warning };
	T_CHECK(config_load_text(&c, typo, sizeof(typo) - 1, "settings.yaml", &em) != 0);
	T_CHECK(strstr(em.text, "Storage:DefaultSharedPth") != NULL && strstr(em.text, "DefaultSharedPath") != NULL);
	config_free(&c);
}

int main(void)
{
	t_file_name = "test_config";
	mem_install();
	if (mkdtemp(dir) == NULL)
		return 2;
	T_RUN(sizes);
	T_RUN(yaml_file_both_vocabularies);
	T_RUN(json_settings_file);
	T_RUN(errors_say_where);
	T_RUN(environment);
	T_RUN(egress_checks);
	T_RUN(metrics_settings);
	T_RUN(tls_settings);
	T_RUN(tls_pem_setting);
	T_RUN(store_settings);
	T_RUN(settings_dir_and_document);
	T_RUN(env_egress_and_secrets);
	T_RUN(settings_dir_refusals);
	T_RUN(monitor_names_in_a_file);
	{
		char cmd[300];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		if (system(cmd) != 0)
			return 2;
	}
	return t_failed_cases ? 1 : 0;
}
