// `ftmaster goodput`: where the job's GPU time went, from the ledger the leading master keeps
// (`goodput` in the master hash, ftmaster/core/goodput.h). Text: ETTR, each cause's
// rank-seconds, wall seconds and share, the phase now, and what each recent incident cost.
// --json: {"job", "ettr", then the ledger as proto::Goodput encodes it}. A job whose master has
// accounted nothing yet says so (exit 0); a garbled ledger is an error naming its field.
#ifndef FT_FTMASTER_CLI_GOODPUT_H_
#define FT_FTMASTER_CLI_GOODPUT_H_

#include <string>

#include "common/status.h"
#include "ftmaster/cli/cli.h"
#include "redis/store.h"

namespace ft::master {

Status GoodputCommand(redis::Commands& client, const CliOptions& options, std::string* out);

}  // namespace ft::master

#endif  // FT_FTMASTER_CLI_GOODPUT_H_
