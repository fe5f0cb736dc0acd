/*
 * fuzz_ipc.c - libFuzzer target for every parser of bytes a runtime (or
 * anything that connects to the diagnostic port) sends us: the advertise,
 * the response header, ProcessInfo 1/2/3, the environment block and the
 * error payload. The first byte picks the parser.
 */
#include <stdint.h>
#include <stdlib.h>

#include "launcher/runtime/ipc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ipc_process_info pi;
	struct ipc_advert a;
	struct ipc_header h;
	char **env, *text;
	size_t n;
	uint32_t hr;

	if (size < 1)
		return 0;
	switch (data[0] % 6) {
	case 0:
		ipc_parse_advert(data + 1, size - 1, &a);
		break;
	case 1:
		if (size - 1 >= IPC_HEADER_SIZE)
			ipc_parse_header(data + 1, &h);
		break;
	case 2:
	case 3:
	case 4:
		if (ipc_parse_process_info(data + 1, size - 1, data[0] % 6 - 1, &pi) == 0)
			ipc_process_info_free(&pi);
		break;
	default:
		if (ipc_parse_env(data + 1, size - 1, &env, &n) == 0)
			ipc_env_free(env, n);
		if (ipc_parse_error(data + 1, size - 1, &hr, &text) == 0)
			free(text);
	}
	return 0;
}
