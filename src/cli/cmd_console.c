/* `ejob console`: the web console and REST API (src/console), and
 * `ejob console hash-password` to make account hashes. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ejob/console.h"
#include "ejob/error.h"
#include "ejob/log.h"
#include "cli/cli.h"
#include "cli/cli_util.h"

#define CMD "console"

static const char usage[] =
    "Usage: ejob console [--config FILE] [--listen ADDR:PORT] [--no-auth]\n"
    "                    [--tls-cert FILE --tls-key FILE] [--audit-log FILE]\n"
    "                    [--store STORE [--store-password-file FILE]]\n"
    "                    [registry options]\n"
    "       ejob console hash-password < password.txt\n"
    "\n"
    "Serve the web console: a page (built into this binary) with the jobs and\n"
    "their status, a job's servers, instances and items updating live, the\n"
    "server view, every operation (trigger, disable/enable, shutdown, remove,\n"
    "config editing checked by the validator), and the JSON REST API under\n"
    "/api/ the page uses. Reads come from a watched copy of each namespace.\n"
    "\n"
    "  -c, --config FILE    settings (YAML): listen, tls, sessionTimeoutSeconds,\n"
    "                       auditLog, registries (several namespaces), accounts\n"
    "                       (name, role admin|guest, passwordHash); see\n"
    "                       ejob-console(1) and " EJ_DOC_DIR "/docs/console.md.\n"
    "                       Refused when others may write it. (Here -c is this\n"
    "                       file, not a daemon file as for the other commands.)\n"
    "  --listen ADDR:PORT   where to listen (default 127.0.0.1:8899; port 0 picks one)\n"
    "  --no-auth            serve without login (everyone is admin); only on a\n"
    "                       loopback address and without accounts\n"
    "  --tls-cert FILE, --tls-key FILE   serve HTTPS with this PEM cert and key\n"
    "  --audit-log FILE     append one line per write (who, what, result) here\n"
    "                       instead of standard error\n"
    "  --store STORE        the execution history to show (as `ejob history`\n"
    "                       reads it): sqlite:PATH, a file path, or\n"
    "                       postgresql://USER@HOST/DB; or history.store in the\n"
    "                       settings file. Without one the history pages say so.\n"
    "  --store-password-file FILE   the PostgreSQL password (first line); else\n"
    "                       EJOB_TRACING_PASSWORD, PGPASSWORD or ~/.pgpass, never\n"
    "                       on the command line\n"
    "\n"
    "There is no default password: without accounts the console starts only with\n"
    "--no-auth on loopback. hash-password reads a password from standard input\n"
    "and prints its SHA-512 crypt hash for the accounts list.\n"
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
    if (line[0] == '\0')
        return ejcli_fail(CMD, "hash-password: the password is empty");
    char hash[256];
    int rc = ej_console_hash_password(line, hash, sizeof hash);
    explicit_bzero(line, sizeof line);
    if (rc != 0)
        return ejcli_fail(CMD, "hash-password: %s", ej_strerror(rc));
    printf("%s\n", hash);
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
    printf(")%s%s%s\n", s->no_auth ? " without login" : "",
           s->history_store != NULL ? ", history from " : "",
           s->history_store != NULL ? s->history_store : "");
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
