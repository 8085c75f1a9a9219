// trainsim_reference: prints the checksum line every rank of the matching trainsim run must
// print, computed in one process with no CUDA (see reference.h).
#include <cstdio>
#include <string>

#include "config.h"
#include "reference.h"

int main(int argc, char** argv) {
  trainsim::Config config;
  std::string error;
  switch (trainsim::ParseArgs(argc, argv, &config, &error)) {
    case trainsim::ParseResult::kHelp:
      std::fputs(trainsim::HelpText(/*reference=*/true).c_str(), stdout);
      return 0;
    case trainsim::ParseResult::kError:
      std::fprintf(stderr, "trainsim_reference: error: %s (see --help)\n", error.c_str());
      return 2;
    case trainsim::ParseResult::kOk:
      break;
  }
  if (!trainsim::Finish(&config, /*world_size=*/0, &error)) {
    std::fprintf(stderr, "trainsim_reference: error: %s\n", error.c_str());
    return 2;
  }
  const trainsim::ReferenceResult r = trainsim::RunReference(config);
  for (int rank = 0; rank < config.world(); ++rank) {
    std::printf("%s\n", trainsim::ChecksumLine(config, rank, r.rank_checksums[rank]).c_str());
  }
  return 0;
}
