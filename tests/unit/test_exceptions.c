/*
 * test_exceptions.c - the exception history (launcher/exceptions/exc_history.h)
 * from events shaped as the runtime sends them: entries and their fields, the
 * inner exception inferred as the thread's last one when the flag says there
 * is one (and only then; catch events, which the session does not ask for,
 * change nothing), two threads apart, the count and byte caps dropping the oldest,
 * a message cut at the cap on a character boundary, payloads cut short;
 * dotnet-monitor's filter document (exc_filters_json); and the crash report
 * reader (launcher/crashes/crash_report.h) on a report shaped as createdump
 * writes it and on bad ones.
 */
#include <stdlib.h>

#include "launcher/crashes/crash_report.h"
#include "launcher/exceptions/exc_history.h"
#include "launcher/exceptions/exceptions.h"
#include "t.h"

static struct nettrace_meta meta_thrown = { .provider = (char *)EXC_PROVIDER, .event_id = 80 };
static struct nettrace_meta meta_catch = { .provider = (char *)EXC_PROVIDER, .event_id = 250 };
static struct nettrace_meta meta_stop = { .provider = (char *)EXC_PROVIDER, .event_id = 251 };
static struct nettrace_meta meta_other = { .provider = (char *)"Other", .event_id = 80 };

static uint8_t payload[16384];

static size_t utf16z(uint8_t *p, const char *s)
{
	size_t n = 0;

	for (; *s; s++) {
		p[n++] = (uint8_t)*s;
		p[n++] = 0;
	}
	p[n++] = 0;
	p[n++] = 0;
	return n;
}

/* ExceptionThrown_V1: type, message, EIP, HRESULT, flags, ClrInstanceID. */
static void thrown(struct exc_history *h, uint64_t tid, const char *type, const char *msg, uint16_t flags,
		   const uint64_t *ips, size_t n_ips, int64_t ms)
{
	size_t n = utf16z(payload, type);
	struct nettrace_event e = { .meta = &meta_thrown, .thread_id = tid, .stack = ips, .stack_n = n_ips };

	n += utf16z(payload + n, msg);
	memset(payload + n, 0, 8 + 4);
	n += 12;
	payload[n++] = (uint8_t)flags;
	payload[n++] = (uint8_t)(flags >> 8);
	payload[n++] = 0;
	payload[n++] = 0;
	e.payload = payload;
	e.payload_len = n;
	T_CHECK(exc_history_event(h, &e, ms));
}

static void event(struct exc_history *h, struct nettrace_meta *m, uint64_t tid)
{
	struct nettrace_event e = { .meta = m, .thread_id = tid, .payload = payload, .payload_len = 0 };

	exc_history_event(h, &e, 0);
}

static void inner_from_last_thrown(void)
{
	struct exc_history h;
	struct exc_entry *e;
	uint64_t ips[3] = { 0x1000, 0x2000, 0x3000 };
	size_t n;

	exc_history_init(&h, 100, 0);
	for (int round = 0; round < 3; round++) {
		thrown(&h, 7, "System.InvalidOperationException", "inner", 0, ips, 3, 1000 + round);
		event(&h, &meta_catch, 7); /* Wrap's catch */
		thrown(&h, 7, "System.ApplicationException", "outer", 0x1, ips + 1, 2, 1001 + round);
		event(&h, &meta_catch, 7);
		event(&h, &meta_stop, 7);
	}
	thrown(&h, 8, "System.Exception", "other thread, flag set, no catch", 0x1, NULL, 0, 2000);
	thrown(&h, 7, "System.Exception", "no flag", 0, NULL, 0, 2001);
	n = exc_history_copy(&h, &e);
	T_CHECK(n == 8);
	T_CHECK(e[0].id == 1 && e[0].inner == 0 && e[0].n_ips == 3 && e[0].ips[2] == 0x3000 && e[0].thread == 7);
	T_STREQ(e[0].type, "System.InvalidOperationException");
	T_STREQ(e[0].message, "inner");
	T_CHECK(e[1].id == 2 && e[1].inner == 1 && e[1].n_ips == 2 && e[1].flags == 1);
	T_CHECK(e[3].inner == 3 && e[5].inner == 5);
	T_CHECK(e[6].thread == 8 && e[6].inner == 0); /* thread 8 is in no catch block */
	T_CHECK(e[7].inner == 0);                    /* no HasInnerException flag */
	T_CHECK(h.seen == 8 && h.dropped == 0);
	exc_entries_free(e, n);
	event(&h, &meta_other, 7);
	T_CHECK(h.n == 8);
	exc_history_free(&h);
}

static void caps(void)
{
	struct exc_history h;
	struct exc_entry *e;
	size_t n;
	char big[6000];

	exc_history_init(&h, 5, 0);
	for (int i = 0; i < 12; i++)
		thrown(&h, 1, "T", "m", 0, NULL, 0, i);
	n = exc_history_copy(&h, &e);
	T_CHECK(n == 5 && e[0].id == 8 && e[4].id == 12 && h.dropped == 7);
	exc_entries_free(e, n);
	exc_history_free(&h);

	exc_history_init(&h, 1000, 4096); /* bytes: each entry about 1.2 KB with its message */
	memset(big, 'a', 1000);
	big[1000] = '\0';
	for (int i = 0; i < 20; i++)
		thrown(&h, 1, "T", big, 0, NULL, 0, i);
	T_CHECK(h.n >= 2 && h.n <= 4 && h.bytes <= 4096);
	n = exc_history_copy(&h, &e);
	T_CHECK(e[n - 1].id == 20);
	exc_entries_free(e, n);
	exc_history_free(&h);

	exc_history_init(&h, 10, 0);
	memset(big, 'b', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	thrown(&h, 1, "T", big, 0, NULL, 0, 0);
	n = exc_history_copy(&h, &e);
	T_CHECK(n == 1 && strlen(e[0].message) == EXC_MAX_MESSAGE && strcmp(e[0].message + EXC_MAX_MESSAGE - 3, "...") == 0);
	exc_entries_free(e, n);
	exc_history_free(&h);
}

static void short_payloads(void)
{
	struct exc_history h;
	struct nettrace_event e = { .meta = &meta_thrown, .thread_id = 1, .payload = payload };

	exc_history_init(&h, 10, 0);
	utf16z(payload, "System.Exception");
	for (size_t len = 0; len < 20; len++) { /* cut inside the type name: nothing kept, nothing read past */
		e.payload_len = len;
		exc_history_event(&h, &e, 0);
	}
	T_CHECK(h.n == 0);
	exc_history_free(&h);
}

static void filters(void)
{
	struct exc_filters f;
	struct err_msg em;
	const char *ok = "{\"Include\":[{\"exceptionType\":\"A\",\"MethodName\":\"M\"}],\"exclude\":[{\"typeName\":null}]}";

	T_CHECK(exc_filters_json(ok, strlen(ok), &f, &em) == 0);
	T_CHECK(f.n_include == 1 && f.n_exclude == 1);
	T_STREQ(f.include[0].exception, "A");
	T_STREQ(f.include[0].method, "M");
	T_CHECK(f.exclude[0].type == NULL);
	exc_filters_free(&f);
	T_CHECK(exc_filters_json("{\"include\":[{\"kind\":\"x\"}]}", strlen("{\"include\":[{\"kind\":\"x\"}]}"), &f, &em) == DP_EINVAL);
	T_CHECK(strstr(em.text, "$.include[0]") && strstr(em.text, "kind"));
	T_CHECK(exc_filters_json("{\"include\":{}}", strlen("{\"include\":{}}"), &f, &em) == DP_EINVAL);
	T_CHECK(exc_filters_json("{\"other\":[]}", strlen("{\"other\":[]}"), &f, &em) == DP_EINVAL);
	T_CHECK(exc_filters_json("[", strlen("["), &f, &em) == DP_ESYNTAX);
	T_CHECK(exc_filters_json("", strlen(""), &f, &em) == DP_EINVAL);
	T_CHECK(exc_filters_json("{\"include\":[{\"methodName\":5}]}", strlen("{\"include\":[{\"methodName\":5}]}"), &f, &em) == DP_EINVAL);
}

static void report(void)
{
	const char *text = "{\"payload\":{\"protocol_version\":\"1.0.0\",\"process_name\":\"console.dll\",\"threads\":["
			   "{\"is_managed\":\"true\",\"crashed\":\"false\",\"native_thread_id\":\"0x75c1\",\"stack_frames\":[]},"
			   "{\"is_managed\":\"true\",\"crashed\":\"true\",\"managed_exception_type\":\"System.InvalidOperationException\","
			   "\"managed_exception_hresult\":\"0x80131509\",\"native_thread_id\":\"0x17a5\",\"stack_frames\":["
			   "{\"is_managed\":\"false\",\"unmanaged_name\":\"wait4\"},"
			   "{\"is_managed\":\"true\",\"method_name\":\"P.Crash()\",\"filename\":\"console.dll\"},"
			   "{\"is_managed\":\"true\",\"method_name\":\"T.Start()\"}]}]},\"parameters\":{}}";
	struct crash_report r;
	struct err_msg em;

	T_CHECK(crash_report_parse(text, strlen(text), &r, &em) == 0);
	T_STREQ(r.process, "console.dll");
	T_CHECK(r.thread == 0x17a5);
	T_STREQ(r.exc_type, "System.InvalidOperationException");
	T_STREQ(r.hresult, "0x80131509");
	T_CHECK(r.n_frames == 2);
	T_STREQ(r.frames[0], "console.dll!P.Crash()");
	T_STREQ(r.frames[1], "T.Start()");
	crash_report_free(&r);
	T_CHECK(crash_report_parse("{\"payload\":{}}", strlen("{\"payload\":{}}"), &r, &em) == DP_EINVAL);
	T_CHECK(crash_report_parse("{", strlen("{"), &r, &em) == DP_ESYNTAX);
	T_CHECK(crash_report_parse("{\"payload\":{\"threads\":[1,\"x\",{\"crashed\":\"true\",\"stack_frames\":5}]}}", strlen("{\"payload\":{\"threads\":[1,\"x\",{\"crashed\":\"true\",\"stack_frames\":5}]}}"), &r, &em) == 0);
	T_CHECK(r.thread == 0 && r.exc_type == NULL && r.n_frames == 0);
	crash_report_free(&r);
}

int main(void)
{
	t_file_name = "exceptions";
	T_RUN(inner_from_last_thrown);
	T_RUN(caps);
	T_RUN(short_payloads);
	T_RUN(filters);
	T_RUN(report);
	return t_failed_cases ? 1 : 0;
}
