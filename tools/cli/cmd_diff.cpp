// SPDX-License-Identifier: Apache-2.0
// `capsule diff`: the semantic trust diff of two trees or git revisions.
#include "commands.hpp"

#include <cstdlib>

#include "capsule/diff.hpp"

namespace capsule::cli {
namespace {

/// A scratch directory removed when the diff is done, whatever happens.
struct ScratchDir {
  fs::path path;
  ~ScratchDir() {
    std::error_code ignored;
    if (!path.empty()) fs::remove_all(path, ignored);
  }
};

}  // namespace

int cmd_diff(const std::vector<std::string>& args, Context& ctx) {
  if (wants_help(args)) {
    ctx.out << options_for(Command::Diff)
            << "\nReports changes in meaning, not text: capsules added, removed or renamed; trust, evidence,\n"
               "VJP mode, layout, reduction, provider, device and expiry changes, each strengthened, weakened\n"
               "or neutral; profile assurance, preference, module order and availability. Then the impact:\n"
               "every op planned under every HEAD profile in both trees.\n"
               "Exit 0 when nothing is weakened; 1 when trust is weakened, a profile newly admits a trusted\n"
               "boundary, or a waiver expired; 2 for usage errors or trees that fail to load.\n"
               "See docs/trust-diff.md.\n";
    return kOk;
  }
  const po::variables_map vm = parse_command(Command::Diff, args, ctx);
  if (!vm.count("base") || !vm.count("head")) throw UsageError{"diff needs BASE and HEAD"};
  enum class Format { Text, Markdown, Json };
  const Format format = choice_value<Format>(vm["format"].as<std::string>(), Command::Diff, "format",
                                             {Format::Text, Format::Markdown, Format::Json});
  const LoadOptions load = load_options(ctx.env);

  std::optional<std::vector<Waiver>> waivers;
  if (vm.count("accept")) {
    auto loaded = load_waivers(vm["accept"].as<std::string>());
    if (!loaded) {
      ctx.err << render(loaded.error(), ctx.err_style);
      ctx.err << "capsule diff: the waivers file failed to load\n";
      return kUsage;
    }
    waivers = std::move(*loaded);
  }

  const std::string base_arg = vm["base"].as<std::string>();
  const std::string head_arg = vm["head"].as<std::string>();
  ScratchDir scratch;
  std::optional<Result<Tree, Diagnostics>> base;
  std::optional<Result<Tree, Diagnostics>> head;
  if (vm["git"].as<bool>()) {
    // A fresh private directory (mkdtemp), never one somebody prepared under a guessable name.
    std::error_code error;
    std::string pattern = (fs::temp_directory_path(error) / "capsule-diff-XXXXXX").string();
    if (error || mkdtemp(pattern.data()) == nullptr) throw UsageError{"cannot create a scratch directory for --git"};
    scratch.path = pattern;
    const fs::path repo = vm["repo"].as<std::string>();
    base.emplace(load_git_tree(base_arg, repo, scratch.path / "base", load));
    head.emplace(load_git_tree(head_arg, repo, scratch.path / "head", load));
  } else {
    for (const std::string& root : {base_arg, head_arg}) {
      std::error_code error;
      if (!fs::is_directory(root, error)) {
        throw UsageError{str("`", root, "` is not a directory (pass --git to compare git revisions)")};
      }
    }
    base.emplace(load_tree(base_arg, base_arg, load));
    head.emplace(load_tree(head_arg, head_arg, load));
  }
  if (!*base || !*head) {
    if (!*base) ctx.err << render(base->error(), ctx.err_style);
    if (!*head) ctx.err << render(head->error(), ctx.err_style);
    ctx.err << "capsule diff: a tree failed to load; nothing was compared\n";
    return kUsage;
  }
  DiffOptions diff_options;
  diff_options.today = load.today;
  TrustDiff diff = diff_trees(**base, **head, diff_options);
  if (waivers) apply_waivers(diff, *waivers);
  diff.environment = ctx.fingerprint;
  switch (format) {
    case Format::Text: ctx.out << render_text(diff, ctx.out_style); break;
    case Format::Markdown: ctx.out << render_markdown(diff); break;
    case Format::Json: ctx.out << render_json(diff); break;
  }
  return exit_status(diff) == 0 ? kOk : kRejected;
}

}  // namespace capsule::cli
