/*
 * aws_profile.h - a profile of the AWS shared files as the SDKs read them
 * (aws_creds.c's chain and region): the credentials file
 * (AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials, or the caller's path)
 * and the config file (AWS_CONFIG_FILE or ~/.aws/config, sections
 * "[profile NAME]" and "[default]"); the profile from the caller, else
 * AWS_PROFILE, else "default". Top-level "key = value" pairs only (nested
 * settings skipped), at most 64 per section, each file at most 1 MiB.
 *
 * Ownership: a profile owns its strings and wipes the values when freed.
 */
#ifndef DP_AWS_PROFILE_H
#define DP_AWS_PROFILE_H

#include <stdbool.h>
#include <stddef.h>

#include "errors.h"

/* One section of one INI file. */
struct aws_ini {
	char *path;
	bool found;    /* the section is there */
	size_t n;
	char *k[64], *v[64];
};

/* Both files' sections for one profile. */
struct aws_profile {
	const char *name;
	bool named;    /* the caller or AWS_PROFILE named it */
	struct aws_ini cred, conf;
};

/* Read both files' sections for name (NULL: AWS_PROFILE or "default"); a missing file is an empty one. DP_EIO/DP_ETOOBIG with em. */
int aws_profile_read(const char *name, const char *cred_path, struct aws_profile *p, struct err_msg *em);
void aws_profile_free(struct aws_profile *p);
/* key's value in the credentials file's section, else the config file's (borrowed), or NULL. */
const char *aws_profile_get(const struct aws_profile *p, const char *key);
/* key's value in one section (borrowed), or NULL. */
const char *aws_profile_ini_get(const struct aws_ini *s, const char *key);

#endif
