// client.cpp: Kineto's own daemon client (libkineto/src/IpcFabricConfigClient.cpp
// and the dynolog IPC fabric headers it includes, compiled from a Kineto
// checkout by run.sh) driven from the command line, to check
// collector/kineto.c against the real thing rather than our reading of it.
//   client STEP...   ctxt: registerInstance(0); req: getLibkinetoOndemandConfig(ACTIVITIES)
#include <cstdio>
#include <cstring>
#include <string>

#include "IpcFabricConfigClient.h"

int main(int argc, char** argv) {
  libkineto::IpcFabricConfigClient client;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "ctxt")) {
      printf("ctxt %d\n", client.registerInstance(0));
    } else if (!strcmp(argv[i], "req")) {
      std::string cfg =
          client.getLibkinetoOndemandConfig(libkineto::LibkinetoConfigType::ACTIVITIES);
      printf("config %zu\n%s", cfg.size(), cfg.c_str());
    } else {
      fprintf(stderr, "client: unknown step %s\n", argv[i]);
      return 2;
    }
    fflush(stdout);
  }
  return 0;
}
