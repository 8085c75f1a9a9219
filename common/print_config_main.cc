// ft-print-config: prints every setting with its default and the value the current
// environment gives it. `--markdown` prints the table in docs/configuration.md.
#include <cstdio>
#include <cstring>

#include "common/config.h"

int main(int argc, char** argv) {
  bool markdown = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--markdown") == 0) {
      markdown = true;
    } else if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::printf("usage: ft-print-config [--markdown]\n");
      return 0;
    } else {
      std::fprintf(stderr, "ft-print-config: unknown flag '%s' (try --help)\n", argv[i]);
      return 2;
    }
  }
  ft::Config config = ft::Config::Defaults();
  std::vector<std::string> warnings;
  if (!markdown) {
    ft::Status status = ft::Config::Load(ft::Environment::FromProcess(), &config, &warnings);
    if (!status.ok()) {
      std::fprintf(stderr, "ft-print-config: %s\n", status.ToString().c_str());
      return 1;
    }
  }
  std::fputs(ft::DescribeConfig(config, markdown).c_str(), stdout);
  for (const std::string& warning : warnings) std::fprintf(stderr, "warning: %s\n", warning.c_str());
  return 0;
}
