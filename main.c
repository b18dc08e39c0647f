#include <dlfcn.h>
#include <stdio.h>
int main(void) { void *h = dlopen("./liba.so", RTLD_NOW | RTLD_LOCAL); if (!h) { puts(dlerror()); return 1; } ((void (*)(void))dlsym(h, "probe"))(); return 0; }
