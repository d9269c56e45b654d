/*
 * custom.h - custom events (custom.c): schemas from InternedData, for the
 * generic decoder; the end of the read and freeing, for the API.
 */
#ifndef ETCH_READER_CUSTOM_H
#define ETCH_READER_CUSTOM_H

#include "reader/reader_int.h"

/* Custom events (custom.c): a schema from InternedData; the end of the
 * read (held serial events); freeing. */
int etch__rd_schema(etch_reader *r, const rd_src *src, const uint8_t *msg,
                    size_t len);
int etch__rd_custom_finish(etch_reader *r);
void etch__rd_custom_free(etch_reader *r);

#endif /* ETCH_READER_CUSTOM_H */
