/* A strict JSON syntax check for the tests of the command's JSON output (RFC 8259: objects,
 * arrays, strings with their escapes, numbers, true, false, null; nothing after the one value
 * but white space). No parsing into values: the tests read fields by name from the text. */
#ifndef CT_JSON_CHECK_H
#define CT_JSON_CHECK_H

#include <ctype.h>
#include <string.h>

static const char *json_value(const char *p, int depth);

static const char *json_space(const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
        p++;
    return p;
}

static const char *json_str(const char *p)
{
    if (*p++ != '"')
        return NULL;
    while (*p != '"') {
        if ((unsigned char)*p < 0x20)
            return NULL;  /* also the end of the text */
        if (*p == '\\') {
            p++;
            if (*p == 'u') {
                for (int i = 1; i <= 4; i++)
                    if (!isxdigit((unsigned char)p[i]))
                        return NULL;
                p += 4;
            } else if (!strchr("\"\\/bfnrt", *p) || !*p) {
                return NULL;
            }
        }
        p++;
    }
    return p + 1;
}

static const char *json_digits(const char *p)
{
    if (!isdigit((unsigned char)*p))
        return NULL;
    while (isdigit((unsigned char)*p))
        p++;
    return p;
}

static const char *json_number(const char *p)
{
    if (*p == '-')
        p++;
    if (*p == '0')
        p++;
    else if (!(p = json_digits(p)))
        return NULL;
    if (*p == '.' && !(p = json_digits(p + 1)))
        return NULL;
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-')
            p++;
        p = json_digits(p);
    }
    return p;
}

/* open '[' or '{'; members are "key": value in an object */
static const char *json_container(const char *p, int depth, char close)
{
    p = json_space(p + 1);
    if (*p == close)
        return p + 1;
    for (;;) {
        if (close == '}') {
            if (!(p = json_str(p)))
                return NULL;
            p = json_space(p);
            if (*p++ != ':')
                return NULL;
        }
        if (!(p = json_value(p, depth + 1)))
            return NULL;
        if (*p == close)
            return p + 1;
        if (*p++ != ',')
            return NULL;
        p = json_space(p);
    }
}

/* p at a value (after white space or not); returns the text after it and its white space */
static const char *json_value(const char *p, int depth)
{
    if (depth > 64)
        return NULL;
    p = json_space(p);
    if (*p == '{' || *p == '[')
        p = json_container(p, depth, *p == '{' ? '}' : ']');
    else if (*p == '"')
        p = json_str(p);
    else if (strncmp(p, "true", 4) == 0)
        p += 4;
    else if (strncmp(p, "false", 5) == 0)
        p += 5;
    else if (strncmp(p, "null", 4) == 0)
        p += 4;
    else
        p = json_number(p);
    return p ? json_space(p) : NULL;
}

/* 1 when text is exactly one JSON value (with white space around it). */
static int json_valid(const char *text)
{
    const char *end = json_value(text, 0);
    return end && *end == '\0';
}

#endif
