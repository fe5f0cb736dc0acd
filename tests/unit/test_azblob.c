/*
 * test_azblob.c - the parts of Azure Blob egress that are data: SharedKey's
 * string-to-sign (the published layout for version 2009-09-19 and later:
 * twelve standard lines, the x-ms-* headers lowercased and sorted, the
 * canonical resource with the query sorted), the metadata names the egress
 * process's pairs become, and Egress:Properties reaching every store
 * provider whichever comes first. The signatures themselves are judged by
 * azurite in tests/integration/azblob.sh.
 */
#include <stdlib.h>

#include "egress/azblob.h"
#include "egress/azblob_int.h"
#include "launcher/config.h"
#include "mem.h"
#include "t.h"

static void string_to_sign_put_block(void)
{
	const char *q[] = { "comp", "block", "blockid", "ZHAtMDAwMQ==", NULL };
	const char *h[] = { "Content-Type: application/octet-stream", "x-ms-version: 2021-12-02",
			    "X-Ms-Date: Thu, 26 Nov 2026 10:00:00 GMT", "x-ms-meta-B:  two ", "x-ms-meta-a: one", NULL };
	char *s = az_string_to_sign("PUT", "devstoreaccount1", "/devstoreaccount1/diag/a%20b.dmp", q, h, 4096);

	T_STREQ(s, "PUT\n\n\n4096\n\napplication/octet-stream\n\n\n\n\n\n\n"
		   "x-ms-date:Thu, 26 Nov 2026 10:00:00 GMT\nx-ms-meta-a:one\nx-ms-meta-b:two\nx-ms-version:2021-12-02\n"
		   "/devstoreaccount1/devstoreaccount1/diag/a%20b.dmp\nblockid:ZHAtMDAwMQ==\ncomp:block");
	free(s);
}

static void string_to_sign_empty_body(void)
{
	const char *h[] = { "x-ms-version: 2021-12-02", NULL };
	char *s = az_string_to_sign("HEAD", "acct", "/diag/x", NULL, h, 0);

	/* Content-Length is empty when 0 (version 2015-02-21 and later) */
	T_STREQ(s, "HEAD\n\n\n\n\n\n\n\n\n\n\n\nx-ms-version:2021-12-02\n/acct/diag/x");
	free(s);
}

static void meta_names(void)
{
	char n[96];

	azblob_meta_name("artifacttype", n, sizeof(n));
	T_STREQ(n, "DotnetMonitor_ArtifactType");
	azblob_meta_name("pid", n, sizeof(n));
	T_STREQ(n, "DotnetMonitor_ProcessId");
	azblob_meta_name("namespace", n, sizeof(n)); /* a C# keyword alone: never a name as is */
	T_STREQ(n, "DotnetMonitor_Namespace");
	azblob_meta_name("pod-name.x", n, sizeof(n));
	T_STREQ(n, "DotnetMonitor_Pod_name_x");
	azblob_meta_name("a-very-long-name-that-goes-on", n, 20);
	T_STREQ(n, "DotnetMonitor_A_ver");
}

static const char *prov_setting(const struct launch_config *c, const char *prov, const char *key)
{
	for (size_t i = 0; i < c->n_egress; i++)
		for (size_t k = 0; strcmp(c->egress[i].name, prov) == 0 && k < c->egress[i].n_set; k++)
			if (strcmp(c->egress[i].set[k].key, key) == 0)
				return c->egress[i].set[k].value;
	return NULL;
}

static void properties_reach_stores(void)
{
	struct launch_config c = { 0 };
	struct err_msg em;

	T_CHECK(config_set(&c, "Egress:Properties:Early", "e1", "test", &em) == 0);
	T_CHECK(config_set(&c, "Egress:AzureBlobStorage:blob:AccountKeyName", "Late", "test", &em) == 0);
	T_CHECK(config_set(&c, "Egress:FileSystem:files:DirectoryPath", "/tmp", "test", &em) == 0);
	T_CHECK(config_set(&c, "egress:properties:Late", "l1", "test", &em) == 0);
	T_CHECK(config_set(&c, "Egress:Properties:Early", "e2", "test", &em) == 0); /* a later source wins */
	T_STREQ(prov_setting(&c, "blob", "Properties:Early"), "e2");
	T_STREQ(prov_setting(&c, "blob", "Properties:Late"), "l1");
	T_CHECK(c.egress[1].n_set == 0); /* FileSystem providers keep no settings */
	T_CHECK(config_set(&c, "Egress:Properties:A:B", "x", "test", &em) == DP_EINVAL);
	T_CHECK(config_set(&c, "Egress:Properties:Empty", "", "test", &em) == DP_EINVAL);
	config_free(&c);
}

int main(void)
{
	t_file_name = "test_azblob";
	mem_install();
	T_RUN(string_to_sign_put_block);
	T_RUN(string_to_sign_empty_body);
	T_RUN(meta_names);
	T_RUN(properties_reach_stores);
	return t_failed_cases ? 1 : 0;
}
