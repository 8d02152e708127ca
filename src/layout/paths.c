/* SPEC §2 in one table: every node of a job, and instance ids. Pure. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ejob/error.h"
#include "ejob/layout.h"
#include "layout/internal.h"

enum arg_kind { ARG_NONE, ARG_ITEM, ARG_NAME };

/* A node's path below /{job}: prefix, then the argument, then suffix. */
struct node_shape {
    const char *prefix;
    enum arg_kind arg;
    const char *suffix;
};

static const struct node_shape shapes[EJ_LAYOUT_NODE_COUNT_] = {
    [EJ_LAYOUT_NODE_JOB] = {"", ARG_NONE, ""},
    [EJ_LAYOUT_NODE_CONFIG] = {"/config", ARG_NONE, ""},
    [EJ_LAYOUT_NODE_SERVERS] = {"/servers", ARG_NONE, ""},
    [EJ_LAYOUT_NODE_SERVER] = {"/servers/", ARG_NAME, ""},
    [EJ_LAYOUT_NODE_INSTANCES] = {"/instances", ARG_NONE, ""},
    [EJ_LAYOUT_NODE_INSTANCE] = {"/instances/", ARG_NAME, ""},
    [EJ_LAYOUT_NODE_SHARDING] = {"/sharding", ARG_NONE, ""},
    [EJ_LAYOUT_NODE_ITEM] = {"/sharding/", ARG_ITEM, ""},
    [EJ_LAYOUT_NODE_ITEM_INSTANCE] = {"/sharding/", ARG_ITEM, "/instance"},
    [EJ_LAYOUT_NODE_ITEM_RUNNING] = {"/sharding/", ARG_ITEM, "/running"},
    [EJ_LAYOUT_NODE_ITEM_FAILOVER] = {"/sharding/", ARG_ITEM, "/failover"},
    [EJ_LAYOUT_NODE_ITEM_MISFIRE] = {"/sharding/", ARG_ITEM, "/misfire"},
    [EJ_LAYOUT_NODE_ITEM_DISABLED] = {"/sharding/", ARG_ITEM, "/disabled"},
    [EJ_LAYOUT_NODE_LEADER] = {"/leader", ARG_NONE, ""},
    [EJ_LAYOUT_NODE_ELECTION_LATCH] = {"/leader/election/latch", ARG_NONE, ""},
    [EJ_LAYOUT_NODE_ELECTION_INSTANCE] = {"/leader/election/instance", ARG_NONE, ""},
    [EJ_LAYOUT_NODE_SHARDING_NECESSARY] = {"/leader/sharding/necessary", ARG_NONE, ""},
    [EJ_LAYOUT_NODE_SHARDING_PROCESSING] = {"/leader/sharding/processing", ARG_NONE, ""},
    [EJ_LAYOUT_NODE_FAILOVER_ITEMS] = {"/leader/failover/items", ARG_NONE, ""},
    [EJ_LAYOUT_NODE_FAILOVER_ITEM] = {"/leader/failover/items/", ARG_ITEM, ""},
    [EJ_LAYOUT_NODE_FAILOVER_LATCH] = {"/leader/failover/latch", ARG_NONE, ""},
    [EJ_LAYOUT_NODE_GUARANTEE_STARTED] = {"/guarantee/started", ARG_NONE, ""},
    [EJ_LAYOUT_NODE_GUARANTEE_STARTED_ITEM] = {"/guarantee/started/", ARG_ITEM, ""},
    [EJ_LAYOUT_NODE_GUARANTEE_COMPLETED] = {"/guarantee/completed", ARG_NONE, ""},
    [EJ_LAYOUT_NODE_GUARANTEE_COMPLETED_ITEM] = {"/guarantee/completed/", ARG_ITEM, ""},
    [EJ_LAYOUT_NODE_SYSTEM_TIME] = {"/systemTime/current", ARG_NONE, ""},
    /* ejob's own: kill requests (ej_console_kill). Java 2.1.5 reads no
     * node it does not know, and reshards only sharding/ and leader/. */
    [EJ_LAYOUT_NODE_KILLS] = {"/kills", ARG_NONE, ""},
    [EJ_LAYOUT_NODE_EJOB_INSTANCES] = {"/ejob/instances", ARG_NONE, ""},
    [EJ_LAYOUT_NODE_EJOB_INSTANCE] = {"/ejob/instances/", ARG_NAME, ""},
    [EJ_LAYOUT_NODE_EJOB_MEMBERS] = {"/ejob/members", ARG_NONE, ""},
    [EJ_LAYOUT_NODE_EJOB_MEMBER] = {"/ejob/members/", ARG_NAME, ""},
};

bool ej_layout_is_segment(const char *s)
{
    if (s == NULL || s[0] == '\0' || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
        return false;
    for (const char *p = s; *p != '\0'; p++)
        if ((unsigned char)*p < 0x20 || *p == '/' || *p == 0x7f)
            return false;
    return true;
}

bool ej_layout_is_job_name(const char *job)
{
    return ej_layout_is_segment(job) && strlen(job) <= EJ_CONFIG_MAX_JOB_NAME;
}

int ej_layout_path(char *buf, size_t len, const char *job, ej_layout_node node, int item,
                    const char *name)
{
    if (buf == NULL || len == 0)
        return EJ_EINVAL;
    buf[0] = '\0';
    if ((int)node < 0 || node >= EJ_LAYOUT_NODE_COUNT_ || !ej_layout_is_job_name(job))
        return EJ_EINVAL;
    const struct node_shape *s = &shapes[node];
    int n;
    if (s->arg == ARG_ITEM) {
        if (item < 0)
            return EJ_EINVAL;
        n = snprintf(buf, len, "/%s%s%d%s", job, s->prefix, item, s->suffix);
    } else if (s->arg == ARG_NAME) {
        if (!ej_layout_is_segment(name))
            return EJ_EINVAL;
        n = snprintf(buf, len, "/%s%s%s%s", job, s->prefix, name, s->suffix);
    } else {
        n = snprintf(buf, len, "/%s%s", job, s->prefix);
    }
    if (n < 0 || (size_t)n >= len || n > EJ_REG_MAX_PATH_LEN) {
        buf[0] = '\0';
        return EJ_EINVAL;
    }
    return n;
}

char *ej_layout_path_dup(const char *job, ej_layout_node node, int item, const char *name)
{
    char buf[EJ_REG_MAX_PATH_LEN + 1];
    if (ej_layout_path(buf, sizeof buf, job, node, item, name) < 0)
        return NULL;
    return strdup(buf);
}

char *ej_layout_marker_path_dup(const char *job, const char *id)
{
    return ej_layout_path_dup(job, EJ_LAYOUT_NODE_EJOB_INSTANCE, 0, id);
}

char *ej_layout_member_live_path_dup(const char *job, const char *id, int64_t session)
{
    char box[EJ_REG_MAX_PATH_LEN + 1];
    if (session <= 0 || ej_layout_path(box, sizeof box, job, EJ_LAYOUT_NODE_EJOB_MEMBER, 0, id) < 0)
        return NULL;
    char buf[EJ_REG_MAX_PATH_LEN + 1];
    int n = snprintf(buf, sizeof buf, "%s/%" PRIx64, box, (uint64_t)session);
    return n > 0 && (size_t)n < sizeof buf ? strdup(buf) : NULL;
}

int ej_layout_instance_ip(const char *id, char *buf, size_t len)
{
    if (buf == NULL || len == 0)
        return EJ_EINVAL;
    buf[0] = '\0';
    if (id == NULL)
        return EJ_EINVAL;
    const char *sep = strstr(id, EJ_LAYOUT_ID_SEP);
    size_t n = sep != NULL ? (size_t)(sep - id) : strlen(id);
    if (n >= len)
        return EJ_EINVAL;
    memcpy(buf, id, n);
    buf[n] = '\0';
    return 0;
}

bool ej_layout_instance_on_server(const char *id, const char *ip)
{
    if (id == NULL || ip == NULL)
        return false;
    size_t n = strlen(ip);
    return n > 0 && strncmp(id, ip, n) == 0 &&
           strncmp(id + n, EJ_LAYOUT_ID_SEP, strlen(EJ_LAYOUT_ID_SEP)) == 0;
}
