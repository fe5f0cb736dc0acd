/*
 * cli.h - `diagport webhook`. Today: `diagport webhook review [FILE]`, the
 * admission decision for one AdmissionReview read from a file or stdin
 * (review.h). The HTTPS server is issue 4's next step.
 */
#ifndef DP_WEBHOOK_CLI_H
#define DP_WEBHOOK_CLI_H

int webhook_cli(int argc, char **argv);

#endif
