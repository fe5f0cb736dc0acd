/*
 * taddr.c - the check of a task's reported address before a token goes there
 * (taddr.h): inet_pton, then the ranges that belong to the host rather than
 * to a task (RFC 6890's special-purpose registries: 0/8, 127/8, 169.254/16,
 * 224/4, 255.255.255.255; ::, ::1, fe80::/10, ff00::/8).
 */
#include "taddr.h"

#include <arpa/inet.h>
#include <stdint.h>
#include <string.h>

static const char *v4_refusal(const uint8_t a[4], bool loopback_ok)
{
	if (a[0] == 0)
		return "unspecified";
	if (a[0] == 127)
		return loopback_ok ? NULL : "loopback";
	if (a[0] == 169 && a[1] == 254)
		return "link-local";
	if (a[0] >= 224 && a[0] <= 239)
		return "multicast";
	if (a[0] == 255 && a[1] == 255 && a[2] == 255 && a[3] == 255)
		return "broadcast";
	return NULL;
}

const char *taddr_refusal(const char *ip, bool loopback_ok, bool *v6)
{
	static const uint8_t zero[16], mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	uint8_t a[16];
	const char *why;

	if (ip && inet_pton(AF_INET, ip, a) == 1) {
		if ((why = v4_refusal(a, loopback_ok)) == NULL && v6)
			*v6 = false;
		return why;
	}
	if (ip == NULL || inet_pton(AF_INET6, ip, a) != 1)
		return "not an IP address";
	if (memcmp(a, mapped, sizeof(mapped)) == 0)
		why = v4_refusal(a + 12, loopback_ok);
	else if (memcmp(a, zero, 16) == 0)
		why = "unspecified";
	else if (memcmp(a, zero, 15) == 0 && a[15] == 1)
		why = loopback_ok ? NULL : "loopback";
	else if (a[0] == 0xfe && (a[1] & 0xc0) == 0x80)
		why = "link-local";
	else if (a[0] == 0xff)
		why = "multicast";
	else
		why = NULL;
	if (why == NULL && v6)
		*v6 = true;
	return why;
}
