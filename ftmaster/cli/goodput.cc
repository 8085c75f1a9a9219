#include "ftmaster/cli/goodput.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "ftmaster/core/goodput.h"
#include "ftmaster/core/text.h"
#include "proto/keys.h"
#include "proto/master_codec.h"
#include "schema/master_hash.h"

namespace ft::master {

namespace {

double Of(const proto::GoodputSeconds& s, proto::GoodputCause c) { return s[static_cast<size_t>(c)]; }

std::string Wall(double seconds) { return HumanMs(seconds * 1000.0); }

}  // namespace

Status GoodputCommand(redis::Commands& client, const CliOptions& o, std::string* out) {
  const proto::Keys keys(o.job);
  redis::Reply reply;
  FT_RETURN_IF_ERROR(client.Run(schema::master_hash::Get(keys, schema::master_hash::kGoodput), &reply).WithContext("HGET"));
  if (!reply.is_string()) {
    *out += o.json ? nlohmann::ordered_json{{"job", o.job}, {"ettr", nullptr}}.dump() + "\n"
                   : fmt::format("job {}: nothing accounted yet (no rank of the job was up while a master led it)\n", o.job);
    return Status::Ok();
  }
  proto::Goodput g;
  FT_RETURN_IF_ERROR(proto::Decode(reply.str(), &g).WithContext(keys.MasterState() + " " + schema::master_hash::kGoodput));
  const GoodputLedger ledger(g);
  if (o.json) {
    nlohmann::ordered_json j = {{"job", o.job}, {"ettr", ledger.Ettr()}};
    nlohmann::ordered_json value = nlohmann::ordered_json::parse(reply.str(), nullptr, false);
    if (value.is_object()) j.update(value);
    *out += j.dump() + "\n";
    return Status::Ok();
  }
  const double rank_total = GoodputLedger::TotalOf(g.rank_s);
  const double wall_total = GoodputLedger::TotalOf(g.wall_s);
  *out += fmt::format("job {}: ETTR {:.3f} over {} held ({:.0f} rank-s); now {}\n", o.job, ledger.Ettr(),
                      Wall(wall_total), rank_total, proto::GoodputCauseName(g.phase));
  *out += fmt::format("{:<12} {:>12} {:>10} {:>7}\n", "CAUSE", "RANK-S", "WALL", "SHARE");
  for (proto::GoodputCause c : proto::kGoodputCauses) {
    const double rank_s = Of(g.rank_s, c);
    *out += fmt::format("{:<12} {:>12.1f} {:>10} {:>6.1f}%\n", proto::GoodputCauseName(c), rank_s,
                        Wall(Of(g.wall_s, c)), rank_total > 0 ? 100.0 * rank_s / rank_total : 0.0);
  }
  if (g.furthest_step >= 0) *out += fmt::format("furthest step reached: {}\n", g.furthest_step);
  for (const proto::GoodputIncident& i : g.incidents) {
    std::string causes;
    for (proto::GoodputCause c : proto::kGoodputCauses) {
      if (Of(i.rank_s, c) <= 0) continue;
      causes += fmt::format("{}{} {:.1f}", causes.empty() ? "" : ", ", proto::GoodputCauseName(c), Of(i.rank_s, c));
    }
    *out += fmt::format("incident {}: lost {:.1f} rank-s ({}){}\n", i.id.empty() ? "(deciding)" : i.id,
                        GoodputLedger::TotalOf(i.rank_s), causes.empty() ? "nothing yet" : causes,
                        i.open ? ", still costing" : "");
  }
  return Status::Ok();
}

}  // namespace ft::master
