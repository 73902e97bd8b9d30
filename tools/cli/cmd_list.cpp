// SPDX-License-Identifier: Apache-2.0
// `capsule list`: capsules, profiles or ops, as text or JSON.
#include "commands.hpp"

#include <map>

#include "capsule/escape.hpp"
#include "capsule/json.hpp"

namespace capsule::cli {

int cmd_list(const std::vector<std::string>& args, Context& ctx) {
  if (wants_help(args)) {
    ctx.out << options_for(Command::List);
    return kOk;
  }
  const po::variables_map vm = parse_command(Command::List, args, ctx);
  if (!vm.count("what")) throw UsageError{"list needs what to list: capsules, profiles or ops"};
  enum class What { Capsules, Profiles, Ops };
  const What what = choice_value<What>(vm["what"].as<std::string>(), Command::List, "what",
                                       {What::Capsules, What::Profiles, What::Ops}, "list");
  const bool json = choice_value<bool>(vm["format"].as<std::string>(), Command::List, "format", {false, true});
  std::optional<Op> op_filter;
  if (vm.count("op")) {
    op_filter = parse_flag_value<Op>(vm["op"].as<std::string>(), "--op");
  }
  std::optional<Device> device_filter;
  if (vm.count("device")) {
    device_filter = parse_flag_value<Device>(vm["device"].as<std::string>(), "--device");
  }
  auto workspace = load(vm, ctx);
  if (!workspace) return kUsage;
  JsonWriter out;
  // A document, not a bare array, so it carries its format version like every JSON output.
  out.begin_document().key(what == What::Ops ? "ops" : what == What::Profiles ? "profiles" : "capsules");
  if (what == What::Ops) {
    out.begin_array();
    for (const Op op : all_values<Op>()) {
      std::map<Device, int> per_device;
      for (const ModulePtr& m : workspace->modules) {
        for (const Capsule& c : m->capsules) per_device[c.device] += c.op == op ? 1 : 0;
      }
      std::vector<std::string> counts;
      for (const auto& [device, count] : per_device) {
        if (count != 0) counts.push_back(str(to_string(device), "=", count));
      }
      if (json) {
        out.begin_object().field("op", to_string(op)).field("requires_vjp", requires_vjp(op)).key("capsules").begin_object();
        for (const auto& [device, count] : per_device) {
          if (count != 0) out.field(to_string(device), static_cast<std::int64_t>(count));
        }
        out.end_object().end_object();
      } else {
        ctx.out << str(to_string(op), requires_vjp(op) ? "" : " (no vjp required)", ": ",
                       counts.empty() ? std::string("no capsules") : join(counts, ", "), "\n");
      }
    }
    out.end_array();
  } else if (what == What::Profiles) {
    out.begin_array();
    for (const ProfilePtr& p : workspace->profiles) {
      if (device_filter && p->policy.device != *device_filter) continue;
      if (json) {
        out.begin_object().field("name", p->name).field("device", to_string(p->policy.device))
            .field("provider", p->policy.provider.label()).field("assurance", p->policy.assurance.label())
            .field("vjp", to_string(p->policy.vjp)).field("recheck", p->recheck.label()).field("summary", p->summary)
            .field("path", p->source.path).end_object();
      } else {
        ctx.out << str(text_escape(p->name), ": device=", to_string(p->policy.device),
                       " provider=", text_escape(p->policy.provider.label()),
                       " assurance=", text_escape(p->policy.assurance.label()), " vjp=", to_string(p->policy.vjp),
                       " recheck=", p->recheck.label(), "\n    ", text_escape(p->summary), "\n");
      }
    }
    out.end_array();
  } else {
    out.begin_array();
    for (const ModulePtr& m : workspace->modules) {
      for (const Capsule& c : m->capsules) {
        if (op_filter && c.op != *op_filter) continue;
        if (device_filter && c.device != *device_filter) continue;
        if (json) {
          out.begin_object().field("name", c.name).field("module", m->name).field("op", to_string(c.op))
              .field("provider", to_string(c.provider)).field("device", to_string(c.device))
              .field("trust", to_string(c.trust)).field("vjp", to_string(c.vjp))
              .field("reduction", to_string(c.numerical.reduction))
              .field("file", c.where.file).field("line", static_cast<std::int64_t>(c.where.line)).end_object();
        } else {
          ctx.out << str(text_escape(c.name), " op=", to_string(c.op), " provider=", to_string(c.provider), " device=",
                         to_string(c.device), " trust=", to_string(c.trust), " vjp=", to_string(c.vjp),
                         " reduction=", to_string(c.numerical.reduction), " module=", text_escape(m->name), "\n");
        }
      }
    }
    out.end_array();
  }
  out.end_object();
  if (json) ctx.out << out.str() << "\n";
  return kOk;
}

}  // namespace capsule::cli
