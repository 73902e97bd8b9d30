// SPDX-License-Identifier: Apache-2.0
// The `capsule` subcommands, one file each; cli.cpp dispatches to them.
#pragma once

#include <string>
#include <vector>

#include "cli_support.hpp"

namespace capsule::cli {

int cmd_lint(const std::vector<std::string>& args, Context& ctx);
int cmd_list(const std::vector<std::string>& args, Context& ctx);
int cmd_plan(const std::vector<std::string>& args, Context& ctx);
int cmd_check(const std::vector<std::string>& args, Context& ctx);
int cmd_explain(const std::vector<std::string>& args, Context& ctx);
int cmd_run(const std::vector<std::string>& args, Context& ctx);
int cmd_diff(const std::vector<std::string>& args, Context& ctx);
int cmd_completions(const std::vector<std::string>& args, Context& ctx);
int cmd_man(const std::vector<std::string>& args, Context& ctx);

}  // namespace capsule::cli
