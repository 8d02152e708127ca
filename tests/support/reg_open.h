/* A registry client on the shared test server, in namespace ns (a fresh
 * one per test: zkf_unique_namespace), with the timeouts the registry
 * tests use; digest NULL or "user:password". NULL when it cannot connect
 * (ej_registry_errmsg says why). */
#ifndef EJ_TEST_REG_OPEN_H
#define EJ_TEST_REG_OPEN_H

#include "ejob/registry.h"
#include "zk_fixture.h"

static inline ej_registry *reg_open(const char *ns, const char *digest)
{
    zkf_server *zk = zkf_shared();
    if (zk == NULL)
        return NULL;
    struct ej_registry_opts o = {0};
    o.servers = zkf_connect_string(zk);
    o.namespace_ = ns;
    o.digest = digest;
    o.session_timeout_ms = 4000;
    o.connection_timeout_ms = 5000;
    ej_registry *reg = NULL;
    if (ej_registry_create(&reg, &o) != 0)
        return NULL;
    return reg;
}

#endif
