/* What a backend says it changed on its own (backend.h's note). */
#include <stdio.h>
#include <string.h>

#include "backend.h"

void ct_backend_add_note(ct_backend *be, const char *text)
{
    size_t used = strlen(be->note);
    if (used + 1 >= sizeof be->note)
        return;
    snprintf(be->note + used, sizeof be->note - used, "%s%s", used ? "; " : "", text);
}
