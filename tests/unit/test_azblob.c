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

/* A setting a store provider sees: under its own node, or "Properties:KEY" in the Egress:Properties beside it. */
static const char *prov_setting(const struct launch_config *c, const char *prov, const char *key)
{
	for (size_t i = 0; i < c->n_egress; i++) {
		const struct settings_node *n;

		if (strcmp(c->egress[i].name, prov) != 0)
			continue;
		if (strncmp(key, "Properties:", 11) == 0)
			n = settings_find(egress_properties(&c->egress[i]), key + 11);
		else
			n = settings_find(c->egress[i].set, key);
		return n ? n->value : NULL;
	}
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
	T_STREQ(prov_setting(&c, "blob", "AccountKeyName"), "Late");
	T_CHECK(c.egress[1].set == NULL); /* FileSystem providers are bound by the agent: no node kept */
	T_CHECK(config_set(&c, "Egress:Properties:A:B", "x", "test", &em) == DP_EINVAL);
	T_CHECK(config_set(&c, "Egress:Properties:Empty", "", "test", &em) == DP_EINVAL);
	config_free(&c);
}

/* The store's reader marks what it reads; one it does not take is refused by path and source, with a suggestion. */
static void store_settings_refused_by_name(void)
{
	struct launch_config c = { 0 };
	struct err_msg em;

	T_CHECK(config_set(&c, "Egress:AzureBlobStorage:az:AccountUri", "https://acct.blob.core.windows.net", "f:2:3",
			   &em) == 0);
	T_CHECK(config_set(&c, "Egress:AzureBlobStorage:az:ContainerName", "diag", "f:3:3", &em) == 0);
	T_CHECK(config_set(&c, "Egress:AzureBlobStorage:az:BlobPrefx", "p", "f:4:3", &em) == 0);
	T_CHECK(azblob_store.check(&c.egress[0], &em) == DP_EINVAL);
	T_STREQ(em.text, "Egress:AzureBlobStorage:az:BlobPrefx (f:4:3): unknown setting; did you mean BlobPrefix?");
	config_free(&c);
	memset(&c, 0, sizeof(c));
	T_CHECK(config_set(&c, "Egress:AzureBlobStorage:az:AccountUri", "https://acct.blob.core.windows.net", "f:2:3",
			   &em) == 0);
	T_CHECK(config_set(&c, "Egress:AzureBlobStorage:az:ContainerName", "diag", "f:3:3", &em) == 0);
	T_CHECK(config_set(&c, "Egress:AzureBlobStorage:az:AccountKeyName", "MyKey", "f:4:3", &em) == 0);
	T_CHECK(config_set(&c, "Egress:Properties:MyKye", "a2V5", "f:6:3", &em) == 0);
	T_CHECK(azblob_store.check(&c.egress[0], &em) == DP_EINVAL);
	T_CHECK(strstr(em.text, "Egress:Properties:MyKye (f:6:3): unknown setting; did you mean MyKey?") == em.text);
	T_CHECK(config_set(&c, "Egress:Properties:MyKey", "a2V5", "f:7:3", &em) == 0);
	T_CHECK(azblob_store.check(&c.egress[0], &em) == 0);
	T_CHECK(config_refuse_unread(&c, &em) == 0);
	config_free(&c);
}

int main(void)
{
	t_file_name = "test_azblob";
	mem_install();
	T_RUN(string_to_sign_put_block);
	T_RUN(string_to_sign_empty_body);
	T_RUN(meta_names);
	T_RUN(store_settings_refused_by_name);
	T_RUN(properties_reach_stores);
	return t_failed_cases ? 1 : 0;
}
