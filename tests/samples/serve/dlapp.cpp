// Opens the plugin named by argv[1] with RTLD_LOCAL and launches through it.
#include <dlfcn.h>

#include <cstdio>

int main(int, char **argv) {
  void *Plugin = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!Plugin) {
    std::printf("dlopen: %s\n", dlerror());
    return 1;
  }
  auto Launch = reinterpret_cast<int (*)()>(dlsym(Plugin, "plugin_launch"));
  std::printf("plugin launch returned %d\n", Launch());
  return 0;
}
