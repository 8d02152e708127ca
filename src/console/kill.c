/*
 * Kill requests (ejob's own node, docs/execution.md "Timeouts and kills"):
 * written here by `ejob kill` and the console, read by every ejob instance
 * of the job (src/runtime/kill.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "console/internal.h"
#include "ejob/error.h"

static void copy_value(char *dst, size_t len, const char *v, size_t n)
{
    if (n >= len)
        n = len - 1;
    memcpy(dst, v, n);
    dst[n] = '\0';
}

bool ej_console_kill_parse(const char *text, struct ej_console_kill_request *req)
{
    memset(req, 0, sizeof *req);
    req->item = -1;
    bool has_item = false;
    for (const char *p = text; p != NULL && *p != '\0';) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        const char *eq = memchr(p, '=', n);
        if (eq != NULL) {
            size_t k = (size_t)(eq - p);
            const char *v = eq + 1;
            size_t vn = n - k - 1;
            if (k == 4 && strncmp(p, "item", 4) == 0) {
                char num[16];
                copy_value(num, sizeof num, v, vn);
                char *end;
                long item = strtol(num, &end, 10);
                if (*end != '\0' || item < -1 || item > EJ_CONFIG_MAX_SHARDING_TOTAL_COUNT)
                    return false;
                req->item = (int)item;
                has_item = true;
            } else if (k == 8 && strncmp(p, "instance", 8) == 0) {
                copy_value(req->instance, sizeof req->instance, v, vn);
            } else if (k == 6 && strncmp(p, "server", 6) == 0) {
                copy_value(req->server, sizeof req->server, v, vn);
            } else if (k == 2 && strncmp(p, "by", 2) == 0) {
                copy_value(req->by, sizeof req->by, v, vn);
            }
        }
        p = nl ? nl + 1 : NULL;
    }
    return has_item;
}

/* Requests older than EJ_CONSOLE_KILL_KEEP_MS (by ZooKeeper's create time):
 * they did their work when they were made. Best effort. */
static void drop_old(ej_registry *reg, const char *dir)
{
    char **names = NULL;
    size_t n = 0;
    if (ej_registry_children(reg, dir, EJ_REG_UNSORTED, &names, &n) != 0)
        return;
    int64_t now = ej__now_ms();
    for (size_t i = 0; i < n; i++) {
        char path[2 * EJ_REG_MAX_PATH_LEN + 2];
        int len = snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        struct ej_node_stat st;
        bool there = false;
        if (len > 0 && len <= EJ_REG_MAX_PATH_LEN &&
            ej_registry_exists(reg, path, &there, &st) == 0 && there &&
            now - st.ctime > EJ_CONSOLE_KILL_KEEP_MS)
            ej_registry_delete(reg, path, -1);
    }
    ej_registry_free_names(names);
}

int ej_console_kill(ej_console *con, const char *job, const struct ej_console_select *sel, int item,
                    const char *by, char **node, char *err, size_t errlen)
{
    if (node != NULL)
        *node = NULL;
    if (con == NULL)
        return EJ_EINVAL;
    int rc = ej__console_require_job(con, job, err, errlen);
    if (rc != 0)
        return rc;
    const char *inst = sel && sel->instance ? sel->instance : "";
    const char *server = sel && sel->server ? sel->server : "";
    if ((inst[0] && !ej_layout_is_segment(inst)) || strchr(inst, '\n') ||
        (server[0] && !ej_layout_is_segment(server)) || strchr(server, '\n'))
        return ej__console_err(EJ_EINVAL, err, errlen, "bad instance or server");
    if (item < -1 || item > EJ_CONFIG_MAX_SHARDING_TOTAL_COUNT)
        return ej__console_err(EJ_EINVAL, err, errlen, "bad item %d", item);
    char who[128];
    snprintf(who, sizeof who, "%s", by && by[0] ? by : "unknown");
    for (char *p = who; *p; p++)
        if ((unsigned char)*p < 0x20)
            *p = ' ';
    char dir[EJ_REG_MAX_PATH_LEN + 1];
    if (ej_layout_path(dir, sizeof dir, job, EJ_LAYOUT_NODE_KILLS, 0, NULL) < 0)
        return ej__console_err(EJ_EINVAL, err, errlen, "bad job name");
    ej_registry *reg = ej_console_registry(con);
    drop_old(reg, dir);
    char *data = ej__asprintf("item=%d\ninstance=%s\nserver=%s\nby=%s\n", item, inst, server, who);
    char *prefix = ej__asprintf("%s/kill-", dir);
    char *made = NULL;
    rc = data && prefix
             ? ej_registry_create_node(reg, prefix, data, strlen(data),
                                       EJ_REG_PERSISTENT_SEQUENTIAL, EJ_REG_CREATE_PARENTS, &made)
             : EJ_ENOMEM;
    free(data);
    free(prefix);
    if (rc != 0)
        return ej__console_reg_err(rc, err, errlen, "cannot write the kill request");
    if (node != NULL) {
        const char *slash = strrchr(made, '/');
        *node = strdup(slash ? slash + 1 : made);
    }
    free(made);
    return 0;
}
