#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
int b_sym(void);
void probe(void) { printf("dlsym(RTLD_DEFAULT, b_sym) = %p\n", dlsym(RTLD_DEFAULT, "b_sym")); }
int use(void) { return b_sym(); }
