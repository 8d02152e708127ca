/* `ejob config get|set`: read and write a job's config node. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "ejob/config.h"
#include "ejob/error.h"
#include "common/util.h"
#include "cli/cli.h"
#include "cli/cli_util.h"
#include "cli/jobinfo.h"

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

static int config_get(ej_registry *reg, const char *job, bool raw)
{
    char path[600];
    snprintf(path, sizeof(path), "/%s/config", job);
    char *data = NULL;
    int err = ejcli_get_opt(reg, path, &data);
    if (err != 0)
        return ejcli_reg_fail(CMD, err, path);
    if (data == NULL)
        return ejcli_fail(CMD, "job \"%s\" has no config node (%s)", job, path);
    int rc = 0;
    if (raw) {
        printf("%s\n", data);
    } else {
        json_error_t jerr;
        json_t *v = json_loads(data, JSON_DECODE_ANY, &jerr);
        if (v == NULL) {
            printf("%s\n", data);
            rc = ejcli_fail(CMD, "%s is not valid JSON (line %d, column %d: %s)", path, jerr.line,
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

static int config_set(ej_registry *reg, const char *job, const char *file, bool dry_run)
{
    char err[512];
    size_t len = 0;
    char *input = read_input(file, &len, err, sizeof(err));
    if (input == NULL)
        return ejcli_fail(CMD, "%s", err);
    const char *name = strcmp(file, "-") == 0 ? "standard input" : file;

    ejcli_install_cron_checker();
    struct ej_job_config cfg;
    int rc = 0;
    char *json = NULL, *old = NULL;
    json_t *jold = NULL, *jnew = NULL;
    if (ej_job_config_init(&cfg) != 0) {
        free(input);
        return ejcli_fail(CMD, "out of memory");
    }
    if (ej_job_config_from_json(input, len, &cfg, err, sizeof(err)) != 0) {
        rc = ejcli_fail(CMD, "invalid config in %s: %s; /%s/%s/config is unchanged", name, err,
                        ej_registry_namespace(reg), job);
        goto out;
    }
    if (cfg.job_name[0] == '\0' && ej_job_config_set_str(&cfg.job_name, job) != 0) {
        rc = ejcli_fail(CMD, "out of memory");
        goto out;
    }
    if (strcmp(cfg.job_name, job) != 0) {
        rc = ejcli_fail(CMD,
                        "invalid config in %s: jobName: is \"%s\" but the job is \"%s\"; "
                        "/%s/%s/config is unchanged",
                        name, cfg.job_name, job, ej_registry_namespace(reg), job);
        goto out;
    }
    if (ej_job_config_validate(&cfg, err, sizeof(err)) != 0) {
        rc = ejcli_fail(CMD, "invalid config in %s: %s; /%s/%s/config is unchanged", name, err,
                        ej_registry_namespace(reg), job);
        goto out;
    }
    json = ej_job_config_to_json(&cfg);
    if (json == NULL) {
        rc = ejcli_fail(CMD, "out of memory");
        goto out;
    }

    char path[600];
    snprintf(path, sizeof(path), "/%s/config", job);
    struct ej_node_stat st;
    size_t oldlen = 0;
    int e = ej_registry_get(reg, path, &old, &oldlen, &st);
    if (e != 0 && e != EJ_ENONODE) {
        rc = ejcli_reg_fail(CMD, e, path);
        goto out;
    }
    bool exists = e == 0;
    if (exists && oldlen == strlen(json) && memcmp(old, json, oldlen) == 0) {
        printf("no change: /%s/%s/config already holds this config\n", ej_registry_namespace(reg),
               job);
        goto out;
    }
    jold = exists ? json_loads(old, JSON_DECODE_ANY, NULL) : NULL;
    jnew = json_loads(json, 0, NULL);
    int changes =
        jnew != NULL ? diff_objects(json_is_object(jold) ? jold : NULL, jnew, NULL, stdout) : 0;
    if (changes == 0)
        printf("  (same fields; the stored JSON is rewritten in ElasticJob's exact form)\n");
    if (dry_run) {
        printf("dry run: /%s/%s/config not changed\n", ej_registry_namespace(reg), job);
        goto out;
    }
    e = exists ? ej_registry_set(reg, path, json, strlen(json), st.version, NULL)
               : ej_registry_create_node(reg, path, json, strlen(json), EJ_REG_PERSISTENT, 0, NULL);
    if (e == EJ_EBADVERSION || e == EJ_ENODEEXISTS || (exists && e == EJ_ENONODE)) {
        rc = ejcli_fail(CMD,
                        "/%s/%s/config changed while this command ran; nothing was "
                        "written, run it again",
                        ej_registry_namespace(reg), job);
        goto out;
    }
    if (e != 0) {
        rc = ejcli_reg_fail(CMD, e, path);
        goto out;
    }
    printf("updated /%s/%s/config\n", ej_registry_namespace(reg), job);
out:
    json_decref(jold);
    json_decref(jnew);
    free(old);
    free(json);
    free(input);
    ej_job_config_fini(&cfg);
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
    if ((rc = ejcli_connect(CMD, &c, &reg, NULL)) != 0)
        return rc;
    rc = ejcli_require_job(CMD, reg, pos[1]);
    if (rc == 0)
        rc = get ? config_get(reg, pos[1], raw) : config_set(reg, pos[1], pos[2], dry_run);
    ej_registry_destroy(reg);
    return rc;
}

EJ_CLI_COMMAND(config, CMD, "print or replace a job's configuration (validated)", usage, run_config)
