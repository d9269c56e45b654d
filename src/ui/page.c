/*
 * page.c - the one HTML document of the viewer: web/index.html's body
 * with web/app.css and web/app.js put inline, so that the document needs
 * nothing else (the server serves it whole; the report is it, with its
 * data). The data of a report goes in a script element of its own, every '<' in it
 * written \u003c, so that no string in it can end the element.
 */
#include <stdio.h>
#include <string.h>

#include "ui/ui.h"

static void put_asset(FILE *out, const char *name) {
  size_t len = 0;
  const char *s = etch__ui_asset(name, &len);
  if (s) fwrite(s, 1, len, out);
}

void etch__ui_page(FILE *out, const char *data, size_t len) {
  fputs("<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        "<meta name=\"viewport\" content=\"width=device-width\">\n"
        "<title>etch</title>\n<style>\n",
        out);
  put_asset(out, "app.css");
  fputs("</style>\n</head>\n<body>\n", out);
  put_asset(out, "index.html");
  if (data) {
    fputs("<script>window.ETCH_REPORT = ", out);
    for (size_t i = 0; i < len; i++) {
      if (data[i] == '<') { /* only ever inside a JSON string */
        fputs("\\u003c", out);
        continue;
      }
      fputc(data[i], out);
    }
    fputs(";</script>\n", out);
  }
  fputs("<script>\n", out);
  put_asset(out, "app.js");
  fputs("</script>\n</body>\n</html>\n", out);
}
