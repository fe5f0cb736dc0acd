/*
 * test_taddr.c - the addresses the fleet client refuses to send a task's token
 * to (fleet/taddr.c): what a tampered DescribeTasks answer could report, with
 * and without loopback allowed (an API endpoint overridden to a local stand-in).
 */
#include "t.h"

#include <stdbool.h>

#include "fleet/taddr.h"

struct tcase {
	const char *ip, *strict, *local; /* the refusal without, and with, loopback allowed (NULL: accepted) */
};

static const struct tcase cases[] = {
	{ "10.0.0.1", NULL, NULL },
	{ "203.0.113.9", NULL, NULL },
	{ "2001:db8::7", NULL, NULL },
	{ "127.0.0.1", "loopback", NULL },
	{ "127.0.0.2", "loopback", NULL },
	{ "::1", "loopback", NULL },
	{ "::ffff:127.0.0.1", "loopback", NULL },
	{ "0.0.0.0", "unspecified", "unspecified" },
	{ "::", "unspecified", "unspecified" },
	{ "169.254.169.254", "link-local", "link-local" },
	{ "169.254.170.2", "link-local", "link-local" },
	{ "::ffff:169.254.169.254", "link-local", "link-local" },
	{ "fe80::1", "link-local", "link-local" },
	{ "febf::1", "link-local", "link-local" },
	{ "224.0.0.1", "multicast", "multicast" },
	{ "239.255.255.250", "multicast", "multicast" },
	{ "ff02::1", "multicast", "multicast" },
	{ "255.255.255.255", "broadcast", "broadcast" },
	{ "evil.example", "not an IP address", "not an IP address" },
	{ "localhost", "not an IP address", "not an IP address" },
	{ "127.0.0.1:39002/x?", "not an IP address", "not an IP address" },
	{ "10.0.0.1/x", "not an IP address", "not an IP address" },
	{ "fe80::1%eth0", "not an IP address", "not an IP address" },
	{ "[::1]", "not an IP address", "not an IP address" },
	{ "0x7f.1", "not an IP address", "not an IP address" },
	{ "", "not an IP address", "not an IP address" },
};

#define SAME(a, b) ((a) == NULL ? (b) == NULL : (b) != NULL && strcmp((a), (b)) == 0)

static void refusals(void)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *s = taddr_refusal(cases[i].ip, false, NULL), *l = taddr_refusal(cases[i].ip, true, NULL);

		if (!SAME(s, cases[i].strict) || !SAME(l, cases[i].local))
			T_FAIL("%s: got %s / %s, want %s / %s", cases[i].ip, s ? s : "accepted", l ? l : "accepted",
			       cases[i].strict ? cases[i].strict : "accepted", cases[i].local ? cases[i].local : "accepted");
	}
}

static void families(void)
{
	bool v6 = true;

	T_CHECK(taddr_refusal("10.1.2.3", false, &v6) == NULL && !v6);
	T_CHECK(taddr_refusal("2001:db8::7", false, &v6) == NULL && v6);
	T_CHECK(taddr_refusal("::1", true, &v6) == NULL && v6);
	T_CHECK(taddr_refusal(NULL, true, &v6) != NULL);
}

int main(void)
{
	t_file_name = "test_taddr";
	T_RUN(refusals);
	T_RUN(families);
	return t_failed_cases ? 1 : 0;
}
