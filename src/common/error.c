#include <string.h>

#include "ejob/error.h"

const char *ej_strerror(int err)
{
    if (err == 0)
        return "success";
    switch (err) {
#define EJ_ERR_MSG(name, value, msg)                                                       \
    case (value):                                                                          \
        return msg;
        EJ_ERRNO_MAP(EJ_ERR_MSG)
#undef EJ_ERR_MSG
    default:
        break;
    }
    if (err < 0 && err > -4096) {
        /* strerror() is not thread-safe; glibc's strerrordesc_np() is and returns a
         * static string. */
        const char *desc = strerrordesc_np(-err);
        if (desc != NULL)
            return desc;
    }
    return "unknown error";
}

const char *ej_err_name(int err)
{
    if (err == 0)
        return "EJ_OK";
    switch (err) {
#define EJ_ERR_NAME(name, value, msg)                                                      \
    case (value):                                                                          \
        return "EJ_" #name;
        EJ_ERRNO_MAP(EJ_ERR_NAME)
#undef EJ_ERR_NAME
    default:
        break;
    }
    if (err < 0 && err > -4096) {
        const char *name = strerrorname_np(-err);
        if (name != NULL)
            return name;
    }
    return "EJ_UNKNOWN";
}

#define EJ_STR2(x) #x
#define EJ_STR(x) EJ_STR2(x)

unsigned ej_version(void)
{
    return EJ_VERSION_HEX;
}

const char *ej_version_string(void)
{
    return EJ_STR(EJ_VERSION_MAJOR) "." EJ_STR(EJ_VERSION_MINOR) "." EJ_STR(EJ_VERSION_PATCH);
}
