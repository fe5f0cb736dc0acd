/*
 * s3_store.h - the S3 uploader as the egress process's store for providers
 * of type S3Storage (launcher/capture/eproc.h). Settings: dotnet-monitor's
 * Egress:S3Storage:NAME keys (BucketName, Endpoint, RegionName,
 * AccessKeyId, SecretAccessKey, AwsProfileName, AwsProfilePath,
 * ForcePathStyle, CopyBufferSize, UseKmsEncryption, KmsEncryptionKey) and
 * diagport's own (SecretAccessKeyFile, SessionToken, KeyPrefix,
 * StorageClass, PartBuffers); an unknown one is refused at startup, named
 * with where it came from.
 */
#ifndef DP_S3_STORE_H
#define DP_S3_STORE_H

#include "store.h"

extern const struct egress_store s3_store;

#endif
