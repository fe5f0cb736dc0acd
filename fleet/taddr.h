/*
 * taddr.h - may the fleet client send an agent's token to an address a cloud
 * API reported for a task (ECS's DescribeTasks)? Only to an IP literal a task
 * can have: never a host name (resolved through DNS), a URL fragment, or an
 * address of the host's own (unspecified, link-local such as the instance
 * metadata service, multicast, broadcast, loopback).
 */
#ifndef DP_FLEET_TADDR_H
#define DP_FLEET_TADDR_H

#include <stdbool.h>

/*
 * NULL when ip is an IPv4 or IPv6 literal (inet_pton) a task may have;
 * loopback (127/8, ::1) only when loopback_ok (the API itself is a local
 * stand-in). Else the reason, a static string: "not an IP address",
 * "unspecified", "loopback", "link-local", "multicast", "broadcast". An
 * IPv4-mapped IPv6 address is judged as its IPv4 address. *v6 (when not NULL)
 * is set on success: the literal is IPv6 and goes in [brackets] in a URL.
 */
const char *taddr_refusal(const char *ip, bool loopback_ok, bool *v6);

#endif
