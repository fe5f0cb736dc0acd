/*
 * opts_text.c - the options table (opts.c) written out for people: the
 * injector's --help lines (wrapped at HELP_WIDTH, descriptions from
 * HELP_COLUMN) and the options table of docs/INJECTION.md (a unit test fails
 * when the two differ). Both come from the same rows, so a new option is
 * documented by adding its row.
 */
#include "opts_int.h"

#include <stdio.h>
#include <string.h>

#define HELP_COLUMN 25 /* where --help's descriptions start, as in the fixed flags' lines (cli.c) */
#define HELP_WIDTH 100

/* What an option takes, as help and docs show it: its choices, or its values text. */
static void takes(const struct inj_option *opt, bool markdown, char *out, size_t n)
{
	size_t k = 0;

	if (opt->kind != OK_CHOICE) {
		snprintf(out, n, "%s", opt->values);
		return;
	}
	out[0] = '\0';
	for (int i = 0; opt->choices[i] && k < n; i++)
		k += (size_t)snprintf(out + k, n - k, markdown ? "%s`%s`" : "%s%s", i ? (markdown ? ", " : "|") : "",
				      opt->choices[i]);
}

/* Text without markdown's backticks. */
static void plain(const char *s, char *out, size_t n)
{
	size_t k = 0;

	for (; *s && k + 1 < n; s++)
		if (*s != '`')
			out[k++] = *s;
	out[k] = '\0';
}

/* "      LEFT  TEXT", TEXT from HELP_COLUMN, wrapped at HELP_WIDTH; LEFT alone on its line when too long. */
static void help_entry(struct buf *out, const char *left, const char *text)
{
	size_t col = 6 + strlen(left);

	buf_printf(out, "      %s", left);
	if (col + 1 > HELP_COLUMN) {
		buf_putc(out, '\n');
		col = 0;
	}
	while (*text) {
		size_t w = strcspn(text, " ");

		if (col > HELP_COLUMN && col + 1 + w > HELP_WIDTH) {
			buf_putc(out, '\n');
			col = 0;
		}
		if (col < HELP_COLUMN) {
			buf_printf(out, "%*s", (int)(HELP_COLUMN - col), "");
			col = HELP_COLUMN;
		} else {
			buf_putc(out, ' ');
			col++;
		}
		buf_printf(out, "%.*s", (int)w, text);
		col += w;
		text += w;
		text += strspn(text, " ");
	}
	buf_putc(out, '\n');
}

void inj_opts_help(struct buf *out)
{
	for (size_t i = 0; i < inj_n_options; i++) {
		const struct inj_option *opt = &inj_options[i];
		char t[160], left[200], h[300], d[160], text[480];

		if (!opt->flag && !opt->switch_flag)
			continue;
		if (opt->arg)
			snprintf(t, sizeof(t), "%s", opt->arg);
		else
			takes(opt, false, t, sizeof(t));
		if (opt->flag && opt->switch_flag)
			snprintf(left, sizeof(left), "%s %s, %s", opt->flag, t, opt->switch_flag);
		else if (opt->flag)
			snprintf(left, sizeof(left), "%s %s", opt->flag, t);
		else
			snprintf(left, sizeof(left), "%s", opt->switch_flag);
		plain(opt->help, h, sizeof(h));
		plain(opt->def, d, sizeof(d));
		if (opt->flag) /* a switch alone (--no-auth) says what it does, not the option's default */
			snprintf(text, sizeof(text), "%s (default: %s)", h, d);
		else
			snprintf(text, sizeof(text), "%s", h);
		help_entry(out, left, text);
	}
}

void inj_opts_markdown(struct buf *out)
{
	buf_puts(out, "| option | command line | values | default | what it does |\n|---|---|---|---|---|\n");
	for (size_t i = 0; i < inj_n_options; i++) {
		const struct inj_option *opt = &inj_options[i];
		char t[160], flags[128] = "—";

		takes(opt, true, t, sizeof(t));
		if (opt->flag && opt->switch_flag)
			snprintf(flags, sizeof(flags), "`%s`, `%s`", opt->flag, opt->switch_flag);
		else if (opt->flag && opt->alias)
			snprintf(flags, sizeof(flags), "`%s` (`--%s`)", opt->flag, opt->alias);
		else if (opt->flag || opt->switch_flag)
			snprintf(flags, sizeof(flags), "`%s`", opt->flag ? opt->flag : opt->switch_flag);
		buf_printf(out, "| `%s` | %s | %s | %s | %s |\n", opt->name, flags, t, opt->def, opt->help);
	}
}
