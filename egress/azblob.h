/*
 * azblob.h - an artifact streamed to Azure Blob Storage as it is produced:
 * the store client the egress process (launcher/capture/eproc.h) calls for a
 * provider of type AzureBlobStorage.
 *
 * Settings are dotnet-monitor's Egress:AzureBlobStorage:NAME keys:
 * AccountUri (required; "https://ACCOUNT.blob.core.windows.net", or an
 * emulator's "http://127.0.0.1:10000/ACCOUNT"), ContainerName (required),
 * BlobPrefix, SharedAccessSignature or SharedAccessSignatureName, AccountKey
 * or AccountKeyName (names of Egress:Properties:KEY values),
 * ManagedIdentityClientId, Metadata:KEY (KEY: the environment variable whose
 * value becomes the blob's metadata KEY), CopyBufferSize (accepted, unused).
 * The Queue* settings are refused: this agent sends no queue message.
 *
 * Credentials, in the order the Azure SDK takes them: the shared access
 * signature (appended to every URL), the account key (SharedKey), else a
 * bearer token from the workload's identity (azblob_int.h: App Service,
 * workload identity, the instance metadata service; ManagedIdentityClientId
 * picks a user-assigned identity), over https only.
 *
 * The blob is BlobPrefix/NAME. An artifact of at most one block is sent in
 * one Put Blob; a longer one as Put Block per AZBLOB_BLOCK bytes (block ids
 * of equal length), then Put Block List, with at most AZBLOB_BUFFERS blocks
 * in memory: the caller fills one while AZBLOB_BUFFERS - 1 threads, each on
 * its own connection, send the others (a slow store slows the producer).
 * Every request is tried again on no answer, 408, 429 and 5xx (azblob_int.h).
 * A failed or aborted upload leaves no uncommitted block: when the blob did
 * not exist before, an empty block list is committed (which discards the
 * uncommitted blocks) and the blob deleted; when it did, it is left as it
 * was and the service discards the uncommitted blocks itself (after 7 days).
 *
 * The egress process passes metadata pairs (artifacttype, pid, ...); Azure
 * metadata names must be C# identifiers, so each becomes
 * DotnetMonitor_<Name> (DotnetMonitor_ArtifactType, DotnetMonitor_ProcessId:
 * dotnet-monitor's prefix for the metadata it adds), values made printable
 * ASCII.
 */
#ifndef DP_EGRESS_AZBLOB_H
#define DP_EGRESS_AZBLOB_H

#include <stddef.h>

#include "store.h"

#define AZBLOB_BLOCK ((size_t)4 << 20) /* bytes per block, and the most a Put Blob carries */
#define AZBLOB_BUFFERS 3               /* blocks in memory per upload: 1 filled, 2 in flight */
#define AZBLOB_MAX_BLOCKS 50000        /* the service's limit per blob (195 GiB at 4 MiB) */
#define AZBLOB_ATTEMPTS 5              /* tries per request */
#define AZBLOB_MAX_META 32

extern const struct egress_store azblob_store;

/*
 * The Azure metadata name for a pair the egress process passes ("pid" ->
 * "DotnetMonitor_ProcessId"), into out (n bytes). Exposed for the unit test.
 */
void azblob_meta_name(const char *name, char *out, size_t n);

#endif
