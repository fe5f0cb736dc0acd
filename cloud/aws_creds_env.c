/*
 * aws_creds_env.c - what a process is told the way the SDKs tell it, besides
 * its keys (aws_creds.h): its region, the endpoints of the services
 * (AWS_ENDPOINT_URL_<SERVICE>, AWS_ENDPOINT_URL), and the time format the
 * credential sources write Expiration in. The bottom of the chain's files
 * (aws_creds_int.h): it calls none of the others.
 */
#include "aws_creds_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aws_profile.h"
#include "mem.h"

const char *aws_creds_env(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

/* n decimal digits at *p into *v, advancing *p; false when they are not there. */
static bool digits(const char **p, int n, int *v)
{
	*v = 0;
	for (int i = 0; i < n; i++, (*p)++) {
		if (**p < '0' || **p > '9')
			return false;
		*v = *v * 10 + (**p - '0');
	}
	return true;
}

static bool lit(const char **p, char c)
{
	if (**p != c)
		return false;
	(*p)++;
	return true;
}

time_t aws_creds_parse_time(const char *s)
{
	int y, mo, d, h, mi, sec, oh = 0, om = 0;
	struct tm tm;
	const char *p = s;
	time_t t;

	if (s == NULL || !digits(&p, 4, &y) || !lit(&p, '-') || !digits(&p, 2, &mo) || !lit(&p, '-') ||
	    !digits(&p, 2, &d) || !(lit(&p, 'T') || lit(&p, 't')) || !digits(&p, 2, &h) || !lit(&p, ':') ||
	    !digits(&p, 2, &mi) || !lit(&p, ':') || !digits(&p, 2, &sec))
		return 0;
	if (*p == '.')
		for (p++; *p >= '0' && *p <= '9'; p++)
			;
	if (*p == '+' || *p == '-') {
		int sign = *p++ == '+' ? -1 : 1;

		if (!digits(&p, 2, &oh) || !lit(&p, ':') || !digits(&p, 2, &om))
			return 0;
		oh *= sign;
		om *= sign;
	} else if (!lit(&p, 'Z') && !lit(&p, 'z')) {
		return 0;
	}
	if (*p != '\0' || y < 1970 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60)
		return 0;
	memset(&tm, 0, sizeof(tm));
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = sec;
	t = timegm(&tm);
	return t == (time_t)-1 ? 0 : t + (time_t)oh * 3600 + (time_t)om * 60;
}

int aws_creds_region(const char *region, const char *profile, char **out, struct err_msg *em)
{
	struct aws_profile p;
	const char *r;
	bool found;

	if ((r = region) != NULL || (r = aws_creds_env("AWS_REGION")) != NULL || (r = aws_creds_env("AWS_DEFAULT_REGION")) != NULL) {
		*out = mem_strdup(r);
		return 0;
	}
	if (aws_profile_read(profile, NULL, &p, em) != 0) {
		aws_profile_free(&p);
		return DP_EINVAL;
	}
	r = aws_profile_ini_get(&p.conf, "region");
	found = r && *r;
	if (found)
		*out = mem_strdup(r);
	aws_profile_free(&p);
	if (found)
		return 0;
	return err_set(em, DP_EINVAL, "no AWS region: give --region, or set AWS_REGION, or region in the profile's "
				      "section of the config file");
}

char *aws_creds_endpoint(const char *env_id, const char *host_prefix, const char *region)
{
	char name[96];
	const char *e;
	size_t n;

	snprintf(name, sizeof(name), "AWS_ENDPOINT_URL_%s", env_id);
	e = getenv(name);
	if (e == NULL || *e == '\0')
		e = getenv("AWS_ENDPOINT_URL");
	if (e == NULL || *e == '\0')
		return mem_printf("https://%s.%s.amazonaws.com", host_prefix, region);
	n = strlen(e);
	while (n > 0 && e[n - 1] == '/')
		n--;
	return mem_strndup(e, n);
}

