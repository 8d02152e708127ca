/* The field table as the console's config form reads it (one fact in one
 * place: the form's inputs, groups, choices and help lines all come from
 * fields.h), and the choices rule that validation shares with it. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "config/internal.h"
#include "ejob/error.h"

bool ej__config_field_choice_ok(const struct ej__cfg_field_desc *f, const char *value)
{
    if (f->choices == NULL || f->choices[0] == '@')
        return true;
    size_t n = strlen(value);
    for (const char *p = f->choices; *p != '\0';) {
        size_t len = strcspn(p, ",");
        if (len == n && strncmp(p, value, n) == 0)
            return true;
        p += len + (p[len] == ',');
    }
    return false;
}

static const char *type_name(const struct ej__cfg_field_desc *f)
{
    switch (f->type) {
    case EJ_CFG_T_INT:
    case EJ_CFG_T_INT64:
        return "integer";
    case EJ_CFG_T_BOOL:
        return "boolean";
    case EJ_CFG_T_OBJ:
        return "object";
    case EJ_CFG_T_TYPE:
        return "enum";
    case EJ_CFG_T_STR:
    case EJ_CFG_T_CLASS:
        break;
    }
    return f->choices != NULL && f->choices[0] != '@' ? "enum" : "string";
}

static json_t *choices_of(const struct ej__cfg_field_desc *f)
{
    json_t *list = json_array();
    for (const char *p = f->choices; list != NULL && p != NULL && *p != '\0';) {
        size_t len = strcspn(p, ",");
        json_array_append_new(list, json_stringn(p, len));
        p += len + (p[len] == ',');
    }
    return list;
}

static json_t *default_of(const struct ej__cfg_field_desc *f)
{
    switch (f->type) {
    case EJ_CFG_T_INT:
    case EJ_CFG_T_INT64:
        return json_integer(f->def_num);
    case EJ_CFG_T_BOOL:
        return json_boolean(f->def_num != 0);
    case EJ_CFG_T_TYPE:
        return json_string(ej_job_type_name((ej_job_type)f->def_num));
    case EJ_CFG_T_OBJ:
        return json_null();
    case EJ_CFG_T_STR:
    case EJ_CFG_T_CLASS:
        break;
    }
    return json_string(ej__config_str(f->def_str));
}

static const char *const form_names[] = {
    [EJ_CFG_FORM_MAIN] = "main",
    [EJ_CFG_FORM_MORE] = "more",
    [EJ_CFG_FORM_JAVA] = "java",
    [EJ_CFG_FORM_NONE] = "none",
};

char *ej_config_fields_json(void)
{
    json_t *all = json_array();
    for (int i = 0; all != NULL && i < EJ_CFG_F_COUNT_; i++) {
        const struct ej__cfg_field_desc *f = &ej__cfg_fields[i];
        if (f->form == EJ_CFG_FORM_NONE)
            continue;
        json_t *row = json_pack(
            "{s:s,s:s,s:b,s:s,s:s,s:s,s:o,s:o,s:b,s:s}", "key", f->key, "name", f->name, "inProps",
            f->where == EJ_CFG_W_PROP, "type", type_name(f), "scope",
            f->scope == EJ_CFG_S_ANY ? "ANY" : ej_job_type_name((ej_job_type)f->scope), "form",
            form_names[f->form], "choices", choices_of(f), "default", default_of(f), "timeZone",
            f->choices != NULL && strcmp(f->choices, "@tz") == 0, "help", f->help);
        if (row == NULL || json_array_append_new(all, row) != 0) {
            json_decref(all);
            return NULL;
        }
    }
    char *text = all != NULL ? json_dumps(all, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(all);
    return text;
}
