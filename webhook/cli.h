/*
 * cli.h - `diagport webhook`: the HTTPS server (server.h), `webhook review
 * [FILE]`, the admission decision for one AdmissionReview read from a file
 * or stdin (review.h), and `webhook certs`, the certificates and caBundle
 * (certs.h).
 */
#ifndef DP_WEBHOOK_CLI_H
#define DP_WEBHOOK_CLI_H

int webhook_cli(int argc, char **argv);

#endif
