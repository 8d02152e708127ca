/* `ejob console`: the web console and REST API (src/console), and
 * `ejob console hash-password` to make account hashes. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ejob/console.h"
#include "ejob/error.h"
#include "ejob/log.h"
#include "ejob/trace.h"
#include "cli/cli.h"
#include "cli/cli_util.h"

#define CMD "console"

static const char usage[] =
    "Usage: ejob console [--config FILE] [--listen ADDR:PORT] [--no-auth]\n"
    "                    [--tls-cert FILE --tls-key FILE] [--audit-log FILE]\n"
    "                    [--store STORE [--store-password-file FILE]]\n"
    "                    [registry options]\n"
    "       ejob console hash-password < password.txt\n"
    "       ejob console token create --config FILE --name NAME --role ROLE\n"
    "                                 [--roles REGISTRY=ROLE,...]\n"
    "                                 [--expires DAYSd|HOURSh|never]\n"
    "       ejob console token list --config FILE\n"
    "       ejob console token revoke --config FILE --name NAME\n"
    "\n"
    "Serve the web console: a page (built into this binary) with the jobs and\n"
    "their status, a job's servers, instances and items updating live, the\n"
    "server view, every operation (trigger, disable/enable, shutdown, remove,\n"
    "config editing checked by the validator), and the JSON REST API under\n"
    "/api/ the page uses. Reads come from a watched copy of each namespace.\n"
    "\n"
    "  -c, --config FILE    settings (YAML): listen, tls, sessionTimeoutSeconds,\n"
    "                       idleTimeoutSeconds, requestTimeoutSeconds, auditLog,\n"
    "                       allowedHosts, tokensFile, registries (several\n"
    "                       namespaces, digest or digestFile), accounts (name,\n"
    "                       role viewer|operator|admin, roles per registry,\n"
    "                       passwordHash); see ejob-console(1) and\n"
    "                       " EJ_DOC_DIR "/docs/console.md. Refused when others\n"
    "                       may write it or another user owns it. (Here -c is\n"
    "                       this file, not a daemon file as for the other commands.)\n"
    "  --listen ADDR:PORT   where to listen (default 127.0.0.1:8899; port 0 picks one)\n"
    "  --no-auth            serve without login (everyone is admin); only on a\n"
    "                       loopback address and without accounts\n"
    "  --tls-cert FILE, --tls-key FILE   serve HTTPS with this PEM cert and key\n"
    "  --audit-log FILE     append one line per write (who, what, result) here\n"
    "                       instead of standard error\n"
    "  --store STORE        the execution history to show (as `ejob history`\n"
    "                       reads it): sqlite:PATH, a file path,\n"
    "                       postgresql://USER@HOST/DB or 'host=HOST user=USER\n"
    "                       dbname=DB'; or history.store in the\n"
    "                       settings file. Without one the history pages say so.\n"
    "  --store-password-file FILE   the PostgreSQL password (first line); else\n"
    "                       EJOB_TRACING_PASSWORD, PGPASSWORD or ~/.pgpass, never\n"
    "                       on the command line\n"
    "\n"
    "There is no default password: without accounts the console starts only with\n"
    "--no-auth on loopback. hash-password reads a password (at least 10\n"
    "characters) from standard input and prints its yescrypt hash for the\n"
    "accounts list (SHA-512 hashes made before are still accepted).\n"
    "\n"
    "API tokens, for scripts (Authorization: Bearer TOKEN on /api/, no CSRF\n"
    "header): `token create` prints a new token once (the tokens file keeps\n"
    "only its hash; tokensFile, default console-tokens.json beside the settings\n"
    "file), with --role viewer|operator|admin, --roles prod=admin,... (a role\n"
    "per registry) and --expires (default 90d);\n"
    "`token list` shows each with its last use; `token revoke` ends one at once.\n"
    "\n"
    "The registry options name one registry besides those of the settings file\n"
    "(or the only one); it is shown under its namespace's name.\n"
    "\n"
    "Registry options:\n" EJCLI_REGISTRY_HELP "\n"
    "Example:\n"
    "  $ ejob console --no-auth --registry 127.0.0.1:2181/ejob-demo\n"
    "  ejob console: serving http://127.0.0.1:8899/ (registries: ejob-demo)\n"
    "\n"
    "Exit codes: 0 stopped by SIGINT/SIGTERM, 1 cannot start (message says why),\n"
    "2 usage error.\n";

static int hash_password(void)
{
    char line[1024];
    if (fgets(line, sizeof line, stdin) == NULL)
        return ejcli_fail(CMD, "hash-password: no password on standard input");
    line[strcspn(line, "\r\n")] = '\0';
    if (strlen(line) < EJ_CONSOLE_MIN_PASSWORD) {
        explicit_bzero(line, sizeof line);
        return ejcli_fail(CMD, "hash-password: the password is shorter than %d characters",
                          EJ_CONSOLE_MIN_PASSWORD);
    }
    char hash[256];
    int rc = ej_console_hash_password(line, hash, sizeof hash);
    explicit_bzero(line, sizeof line);
    if (rc != 0)
        return ejcli_fail(CMD, "hash-password: %s", ej_strerror(rc));
    printf("%s\n", hash);
    return EJ_EXIT_OK;
}

/* --expires: "90d", "12h" or "never" into Unix seconds (0: never). */
static int parse_expires(const char *text, int64_t *out)
{
    if (strcmp(text, "never") == 0) {
        *out = 0;
        return 0;
    }
    char *end = NULL;
    long n = strtol(text, &end, 10);
    if (end == text || n <= 0 || n > 3650 * 24 || (strcmp(end, "d") != 0 && strcmp(end, "h") != 0))
        return EJ_EINVAL;
    *out = (int64_t)time(NULL) + (int64_t)n * (end[0] == 'd' ? 86400 : 3600);
    return 0;
}

/* --roles "prod=operator,batch=admin" into grants (registry points into
 * text, which is cut up). Returns how many, or -1 when malformed. */
static int parse_roles(char *text, struct ej_console_grant *grants, int max)
{
    int n = 0;
    for (char *save = NULL, *t = strtok_r(text, ",", &save); t != NULL;
         t = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(t, '=');
        if (eq == NULL || eq == t || n == max)
            return -1;
        *eq = '\0';
        grants[n].registry = t;
        if (!ej_console_role_parse(eq + 1, &grants[n].role))
            return -1;
        n++;
    }
    return n;
}

/* The tokens file named by the settings file. */
static int tokens_file_of(const char *config, char **out, char **audit_log)
{
    if (config == NULL)
        return ej_cli_usage_error(CMD, "token: --config FILE names the settings file");
    struct ej_console_settings s;
    ej_console_settings_init(&s);
    char err[1024];
    int rc = ej_console_settings_load(config, &s, err, sizeof err);
    if (rc == 0) {
        *out = s.tokens_file;
        s.tokens_file = NULL;
        *audit_log = s.audit_log;
        s.audit_log = NULL;
    }
    ej_console_settings_fini(&s);
    return rc != 0 ? ejcli_fail(CMD, "%s", err) : 0;
}

static int token_command(int argc, char **argv)
{
    const char *config = NULL, *name = NULL, *role_name = NULL, *expires_text = "90d";
    const char *roles_text = NULL;
    struct ejcli_flag flags[] = {
        {"config", 'c', EJCLI_STR, &config},      {"name", 0, EJCLI_STR, &name},
        {"role", 0, EJCLI_STR, &role_name},       {"roles", 0, EJCLI_STR, &roles_text},
        {"expires", 0, EJCLI_STR, &expires_text}, EJCLI_FLAGS_END};
    const char *verb = argc >= 3 ? argv[2] : "";
    char *pos[1];
    int npos;
    int rc = ejcli_parse(CMD " token", argc - 2, argv + 2, flags, pos, 0, &npos);
    if (rc != 0)
        return rc;
    bool create = strcmp(verb, "create") == 0, revoke = strcmp(verb, "revoke") == 0;
    if (!create && !revoke && strcmp(verb, "list") != 0)
        return ej_cli_usage_error(CMD, "token: expected create, list or revoke");
    if ((create || revoke) && name == NULL)
        return ej_cli_usage_error(CMD, "token %s: --name NAME is required", verb);
    ej_console_role role = EJ_CONSOLE_ROLE_VIEWER;
    if (create && !ej_console_role_parse(role_name, &role))
        return ej_cli_usage_error(CMD, "token create: --role viewer, operator or admin");
    struct ej_console_grant grants[16];
    char roles_buf[1024];
    snprintf(roles_buf, sizeof roles_buf, "%s", roles_text != NULL ? roles_text : "");
    int ngrants = create ? parse_roles(roles_buf, grants, 16) : 0;
    if (ngrants < 0)
        return ej_cli_usage_error(CMD, "token create: --roles REGISTRY=ROLE[,REGISTRY=ROLE...], "
                                       "ROLE viewer, operator or admin, at most 16");
    int64_t expires = 0;
    if (create && parse_expires(expires_text, &expires) != 0)
        return ej_cli_usage_error(CMD, "token create: --expires DAYSd, HOURSh or never, not \"%s\"",
                                  expires_text);
    char *file = NULL, *audit_log = NULL;
    if ((rc = tokens_file_of(config, &file, &audit_log)) != 0)
        return rc;
    char err[1024] = "", token[256];
    if (create)
        rc = ej_console_token_create(file, name, role, grants, (size_t)ngrants, expires, token,
                                     sizeof token, err, sizeof err);
    else if (revoke)
        rc = ej_console_token_revoke(file, name, err, sizeof err);
    else
        rc = ej_console_token_list(file, stdout, err, sizeof err);
    free(file);
    if (rc == 0 && (create || revoke) &&
        ej_console_audit_token(audit_log, create ? "token create" : "token revoke", name,
                               create ? ej_console_role_name(role) : NULL) != 0)
        fprintf(stderr, "ejob console: warning: cannot append to the audit log %s\n",
                audit_log != NULL ? audit_log : "(standard error)");
    free(audit_log);
    if (rc != 0)
        return ejcli_fail(CMD, "token %s: %s", verb, err[0] ? err : ej_strerror(rc));
    if (create) {
        printf("%s\n", token);
        fprintf(stderr, "ejob console: token \"%s\" (%s) created; it is shown only this once\n",
                name, ej_console_role_name(role));
        explicit_bzero(token, sizeof token);
    } else if (revoke) {
        fprintf(stderr, "ejob console: token \"%s\" revoked\n", name);
    }
    return EJ_EXIT_OK;
}

struct console_args {
    struct ejcli_common c;
    const char *config, *listen, *tls_cert, *tls_key, *audit_log;
    const char *store, *store_password_file;
    bool no_auth;
};

static int set_str(char **field, const char *v)
{
    if (v == NULL)
        return 0;
    free(*field);
    *field = strdup(v);
    return *field != NULL ? 0 : EJ_ENOMEM;
}

/* Settings file first, then the flags over it. */
static int build_settings(const struct console_args *a, struct ej_console_settings *s)
{
    char err[1024];
    if (a->config != NULL && ej_console_settings_load(a->config, s, err, sizeof err) != 0)
        return ejcli_fail(CMD, "%s", err);
    if (set_str(&s->listen, a->listen) != 0 || set_str(&s->tls_cert_file, a->tls_cert) != 0 ||
        set_str(&s->tls_key_file, a->tls_key) != 0 || set_str(&s->audit_log, a->audit_log) != 0 ||
        set_str(&s->history_store, a->store) != 0 ||
        set_str(&s->history_password_file, a->store_password_file) != 0)
        return ejcli_fail(CMD, "out of memory");
    s->no_auth = a->no_auth;
    bool named = a->c.registry != NULL || getenv("EJOB_REGISTRY") != NULL;
    if (s->registry_count == 0 || named) {
        struct ejcli_target t;
        int rc = ejcli_resolve(CMD, &a->c, &t);
        if (rc != 0)
            return rc;
        if (ej_console_settings_add_registry(s, t.namespace_, t.servers, t.namespace_, t.digest) !=
            0)
            return ejcli_fail(CMD, "out of memory");
    }
    if (ej_console_settings_check(s, err, sizeof err) != 0)
        return ejcli_fail(CMD, "%s", err);
    return 0;
}

static int serve(const struct ej_console_settings *s)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    /* Block before threads start so only sigwait below sees them. */
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    ej_console_web *web = NULL;
    char err[1024] = "";
    int rc = ej_console_web_start(s, &web, err, sizeof err);
    if (rc != 0)
        return ejcli_fail(CMD, "%s", err[0] ? err : ej_strerror(rc));
    char host[64];
    snprintf(host, sizeof host, "%s", s->listen != NULL ? s->listen : "127.0.0.1:8899");
    host[strcspn(host, ":")] = '\0';
    printf("ejob console: serving %s://%s:%d/ (registries:", s->tls_cert_file ? "https" : "http",
           host, ej_console_web_port(web));
    for (size_t i = 0; i < s->registry_count; i++)
        printf(" %s", s->registries[i].name);
    /* The store as it may be shown: never a password, whatever was given. */
    struct ej_trace_target store;
    char *shown = s->history_store != NULL &&
                          ej_trace_target_parse(s->history_store, &store, err, sizeof err) == 0
                      ? ej_trace_target_display(&store)
                      : NULL;
    printf(")%s%s%s\n", s->no_auth ? " without login" : "", shown != NULL ? ", history from " : "",
           shown != NULL ? shown : "");
    free(shown);
    fflush(stdout);
    int sig = 0;
    sigwait(&set, &sig);
    ej_console_web_stop(web);
    return EJ_EXIT_OK;
}

static int run_console(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "hash-password") == 0) {
        if (argc != 2)
            return ej_cli_usage_error(CMD, "hash-password takes no argument (it reads stdin)");
        return hash_password();
    }
    if (argc >= 2 && strcmp(argv[1], "token") == 0)
        return token_command(argc, argv);
    struct console_args a = {0};
    ejcli_common_init(&a.c);
    /* -c is the console's settings file: before the common flags (the
     * first match wins), whose -c names a daemon file. */
    struct ejcli_flag flags[] = {{"config", 'c', EJCLI_STR, &a.config},
                                 EJCLI_COMMON_FLAGS(&a.c),
                                 {"listen", 0, EJCLI_STR, &a.listen},
                                 {"no-auth", 0, EJCLI_BOOL, &a.no_auth},
                                 {"tls-cert", 0, EJCLI_STR, &a.tls_cert},
                                 {"tls-key", 0, EJCLI_STR, &a.tls_key},
                                 {"audit-log", 0, EJCLI_STR, &a.audit_log},
                                 {"store", 0, EJCLI_STR, &a.store},
                                 {"store-password-file", 0, EJCLI_STR, &a.store_password_file},
                                 EJCLI_FLAGS_END};
    char *pos[1];
    int npos;
    int rc = ejcli_parse(CMD, argc, argv, flags, pos, 0, &npos);
    if (rc != 0)
        return rc;
    if (getenv("EJOB_LOG_LEVEL") == NULL)
        ej_log_set_level(EJ_LOG_WARN);
    struct ej_console_settings s;
    ej_console_settings_init(&s);
    rc = build_settings(&a, &s);
    if (rc == 0)
        rc = serve(&s);
    ej_console_settings_fini(&s);
    return rc;
}

EJ_CLI_COMMAND(console, CMD, "serve the web console and its REST API", usage, run_console)
