/* `ejob config get|set`: read and write a job's config node. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "ejob/config.h"
#include "ejob/console.h"
#include "ejob/error.h"
#include "common/util.h"
#include "cli/cli.h"
#include "cli/cli_util.h"

#define CMD "config"

static const char usage[] =
    "Usage: ejob config get JOB [--raw] [registry options]\n"
    "       ejob config set JOB FILE|- [--dry-run] [registry options]\n"
    "\n"
    "get  prints /NAMESPACE/JOB/config as indented JSON (--raw: the bytes as\n"
    "     stored, then a newline).\n"
    "set  replaces it with the JSON in FILE (- reads standard input). The input\n"
    "     is parsed and validated first (every field, the cron expression\n"
    "     included); an invalid config is refused with the field named and the\n"
    "     node is left unchanged. Either shape ElasticJob writes is accepted (the\n"
    "     job's own or the console's), keys in any order; a missing jobName is\n"
    "     taken from JOB, a different one is refused. What is written is the\n"
    "     exact JSON ElasticJob 2.1.5 writes. The changed fields are printed\n"
    "     first; --dry-run prints them and writes nothing. The write is\n"
    "     conditional on the node's version, so a concurrent change is not\n"
    "     overwritten (run the command again).\n"
    "     Running instances apply the new config: a cron change reschedules, a\n"
    "     shardingTotalCount change reshards, failover off clears failover.\n"
    "\n"
    "Missing keys take ElasticJob's defaults for a stored config: a missing\n"
    "\"misfire\" reads as false. Edit the output of `config get` rather than\n"
    "writing a partial file.\n"
    "\n" EJCLI_COMMON_HELP "\n"
    "Example:\n"
    "  $ ejob config get demoJob > demo.json\n"
    "  $ sed -i 's|0/2 \\* \\* \\* \\* ?|0/5 * * * * ?|' demo.json\n"
    "  $ ejob config set demoJob demo.json\n"
    "    cron: \"0/2 * * * * ?\" -> \"0/5 * * * * ?\"\n"
    "  updated /demo/demoJob/config\n"
    "\n"
    "Exit codes: 0 done, 1 no such job / invalid config / unreadable file /\n"
    "registry error, 2 usage error.\n";

static char *read_input(const char *file, size_t *len, char *err, size_t errlen)
{
    FILE *f = strcmp(file, "-") == 0 ? stdin : fopen(file, "rb");
    if (f == NULL) {
        snprintf(err, errlen, "cannot open %s: %s", file, strerror(errno));
        return NULL;
    }
    ej_buf b;
    ej__buf_init(&b);
    char chunk[8192];
    size_t n;
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
        if (b.len + n > EJ_CONFIG_MAX_JSON) {
            snprintf(err, errlen, "%s is larger than %d bytes", file, EJ_CONFIG_MAX_JSON);
            ej__buf_fini(&b);
            if (f != stdin)
                fclose(f);
            return NULL;
        }
        ej__buf_append(&b, chunk, n);
    }
    bool failed = ferror(f) != 0;
    if (f != stdin)
        fclose(f);
    if (failed || b.failed) {
        snprintf(err, errlen, "cannot read %s", file);
        ej__buf_fini(&b);
        return NULL;
    }
    *len = b.len;
    return ej__buf_steal(&b);
}

static char *show(json_t *v)
{
    if (v == NULL)
        return strdup("(absent)");
    return json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
}

/* Print "  key: old -> new" for every differing key (one level into
 * objects). Returns how many differ. */
static int diff_objects(json_t *old, json_t *new, const char *prefix, FILE *out)
{
    int changes = 0;
    const char *key;
    json_t *v;
    json_object_foreach(new, key, v)
    {
        json_t *o = old != NULL ? json_object_get(old, key) : NULL;
        if (o != NULL && json_equal(o, v))
            continue;
        if (prefix == NULL && json_is_object(v) && json_is_object(o)) {
            changes += diff_objects(o, v, key, out);
            continue;
        }
        char *a = show(o), *b = show(v);
        fprintf(out, "  %s%s%s: %s -> %s\n", prefix ? prefix : "", prefix ? "." : "", key, a, b);
        free(a);
        free(b);
        changes++;
    }
    if (old != NULL) {
        json_object_foreach(old, key, v)
        {
            if (json_object_get(new, key) != NULL)
                continue;
            char *a = show(v);
            fprintf(out, "  %s%s%s: %s -> (absent)\n", prefix ? prefix : "", prefix ? "." : "", key,
                    a);
            free(a);
            changes++;
        }
    }
    return changes;
}

static int config_get(ej_console *con, const char *job, bool raw)
{
    char *data = NULL;
    char err[1024] = "";
    int e = ej_console_config_get(con, job, &data, NULL, err, sizeof err);
    if (e != 0)
        return ejcli_console_fail(CMD, e, err);
    int rc = 0;
    if (raw) {
        printf("%s\n", data);
    } else {
        json_error_t jerr;
        json_t *v = json_loads(data, JSON_DECODE_ANY, &jerr);
        if (v == NULL) {
            printf("%s\n", data);
            rc = ejcli_fail(CMD, "/%s/%s/config is not valid JSON (line %d, column %d: %s)",
                            ej_registry_namespace(ej_console_registry(con)), job, jerr.line,
                            jerr.column, jerr.text);
        } else {
            char *s = json_dumps(v, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY);
            if (s != NULL)
                printf("%s\n", s);
            free(s);
            json_decref(v);
        }
    }
    free(data);
    return rc;
}

/* Print what changes between the stored and the new JSON. */
static void print_changes(const struct ej_console_config_change *ch)
{
    json_t *jold = ch->old_json != NULL ? json_loads(ch->old_json, JSON_DECODE_ANY, NULL) : NULL;
    json_t *jnew = json_loads(ch->new_json, 0, NULL);
    int changes =
        jnew != NULL ? diff_objects(json_is_object(jold) ? jold : NULL, jnew, NULL, stdout) : 0;
    if (changes == 0)
        printf("  (same fields; the stored JSON is rewritten in ElasticJob's exact form)\n");
    json_decref(jold);
    json_decref(jnew);
}

static char *join_errors(const struct ej_config_errors *errs)
{
    ej_buf b;
    ej__buf_init(&b);
    for (size_t i = 0; i < errs->count; i++)
        ej__buf_printf(&b, "%s%s", i ? "; " : "", errs->messages[i]);
    return b.failed ? NULL : ej__buf_steal(&b);
}

static int config_set(ej_console *con, const char *job, const char *file, bool dry_run)
{
    char err[512];
    size_t len = 0;
    char *input = read_input(file, &len, err, sizeof(err));
    if (input == NULL)
        return ejcli_fail(CMD, "%s", err);
    const char *name = strcmp(file, "-") == 0 ? "standard input" : file;
    const char *ns = ej_registry_namespace(ej_console_registry(con));
    struct ej_console_config_change ch;
    struct ej_config_errors errs;
    ej_config_errors_init(&errs);
    /* Compare first, so the changes are printed before the write. */
    int e = ej_console_config_set(con, job, input, len, -1, true, &ch, &errs);
    int version = ch.old_version;
    int rc = 0;
    if (e == EJ_ECONFIG) {
        char *all = join_errors(&errs);
        rc = ejcli_fail(CMD, "invalid config in %s: %s; /%s/%s/config is unchanged", name,
                        all != NULL ? all : "out of memory", ns, job);
        free(all);
    } else if (e == EJ_EBADVERSION) {
        rc = ejcli_fail(CMD,
                        "/%s/%s/config changed while this command ran; nothing was written, run "
                        "it again",
                        ns, job);
    } else if (e != 0) {
        rc = ejcli_console_fail(CMD, e, errs.count > 0 ? errs.messages[0] : NULL);
    } else if (!ch.changed) {
        printf("no change: /%s/%s/config already holds this config\n", ns, job);
    } else {
        print_changes(&ch);
        if (dry_run) {
            printf("dry run: /%s/%s/config not changed\n", ns, job);
        } else {
            ej_console_config_change_fini(&ch);
            ej_config_errors_fini(&errs);
            e = ej_console_config_set(con, job, input, len, version, false, &ch, &errs);
            if (e == EJ_EBADVERSION)
                rc = ejcli_fail(CMD,
                                "/%s/%s/config changed while this command ran; nothing was "
                                "written, run it again",
                                ns, job);
            else if (e != 0)
                rc = ejcli_console_fail(CMD, e, errs.count > 0 ? errs.messages[0] : NULL);
            else
                printf("updated /%s/%s/config\n", ns, job);
        }
    }
    ej_console_config_change_fini(&ch);
    ej_config_errors_fini(&errs);
    free(input);
    return rc;
}

static int run_config(int argc, char **argv)
{
    struct ejcli_common c;
    ejcli_common_init(&c);
    bool raw = false, dry_run = false;
    struct ejcli_flag flags[] = {EJCLI_COMMON_FLAGS(&c),
                                 {"raw", 0, EJCLI_BOOL, &raw},
                                 {"dry-run", 0, EJCLI_BOOL, &dry_run},
                                 EJCLI_FLAGS_END};
    char *pos[3];
    int npos;
    int rc = ejcli_parse(CMD, argc, argv, flags, pos, 3, &npos);
    if (rc != 0)
        return rc;
    if (npos < 1)
        return ej_cli_usage_error(CMD, "expected get or set");
    bool get = strcmp(pos[0], "get") == 0;
    bool set = strcmp(pos[0], "set") == 0;
    if (!get && !set)
        return ej_cli_usage_error(CMD, "unknown action \"%s\" (expected get or set)", pos[0]);
    if (npos < 2)
        return ej_cli_usage_error(CMD, "expected a job name");
    if (get && npos != 2)
        return ej_cli_usage_error(CMD, "config get takes one job name");
    if (set && npos != 3)
        return ej_cli_usage_error(CMD, "config set needs a job name and a FILE (or -)");
    if (get && dry_run)
        return ej_cli_usage_error(CMD, "--dry-run applies to config set");
    if (set && raw)
        return ej_cli_usage_error(CMD, "--raw applies to config get");
    if ((rc = ejcli_check_job_name(CMD, pos[1])) != 0)
        return rc;
    ej_registry *reg;
    ej_console *con;
    if ((rc = ejcli_console(CMD, &c, &reg, &con)) != 0)
        return rc;
    rc = get ? config_get(con, pos[1], raw) : config_set(con, pos[1], pos[2], dry_run);
    ej_console_destroy(con);
    ej_registry_destroy(reg);
    return rc;
}

EJ_CLI_COMMAND(config, CMD, "print or replace a job's configuration (validated)", usage, run_config)
