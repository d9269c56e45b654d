/* sym_lib.h - sym_lib.c and sym_plugin.c, for sym_prog.c. */
#ifndef ETCH_TESTS_SYM_LIB_H
#define ETCH_TESTS_SYM_LIB_H
#include <stddef.h>
void sym_take(size_t size); /* sym_prog.c */
void sym_exported(void);  /* sym_prog.c */
extern void *sym_kept[8]; /* sym_prog.c */
extern unsigned sym_nkept;
void sym_lib_alloc(void);
void sym_plugin_alloc(void);
#endif
