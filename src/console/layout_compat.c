/* The layout's names of 1.0 (ejob/console.h), kept within the major
 * version: each is the layout's function of the same shape. */
#include <stdbool.h>
#include <stddef.h>

#include "ejob/console.h"
#include "ejob/layout.h"

int ej_console_path(char *buf, size_t len, const char *job, ej_console_node node, int item,
                    const char *name)
{
    return ej_layout_path(buf, len, job, node, item, name);
}

char *ej_console_path_dup(const char *job, ej_console_node node, int item, const char *name)
{
    return ej_layout_path_dup(job, node, item, name);
}

char *ej_console_ejob_marker_path_dup(const char *job, const char *id)
{
    return ej_layout_marker_path_dup(job, id);
}

bool ej_console_is_job_name(const char *job)
{
    return ej_layout_is_job_name(job);
}

bool ej_console_is_segment(const char *s)
{
    return ej_layout_is_segment(s);
}

void ej_console_instance_ip(const char *id, char *buf, size_t len)
{
    (void)ej_layout_instance_ip(id, buf, len);
}

bool ej_console_instance_on_server(const char *id, const char *ip)
{
    return ej_layout_instance_on_server(id, ip);
}
