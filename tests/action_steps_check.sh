#!/bin/bash
# The composite action's shell steps (action.yml), run as GitHub would run them but against
# scratch git repositories and a stand-in capsule that records its arguments:
#   - the lint configuration is read from the base revision by lint's own search (the nearest
#     capsule-lint.toml from `root` up to the work tree's top), for root `.`, `ml`, `./ml/`, `a/b`;
#     a link or a directory there, a missing merge base (a shallow checkout, a bad base-ref) and a
#     root outside the repository fail the step with an `::error` line and --no-config, never
#     falling back to the pull request's own file;
#   - no line of the log can be forged by a hostile root;
#   - SARIF is written only where no parent component is a link, replaces a link at the target,
#     and `sarif-file` is output only for a non-empty file that was written;
#   - the docs URL compiled into the build is derived from the action's repository and ref only
#     when both are of a strict form, passes the build's own CAPSULE_DOCS_URL check, and reaches
#     cmake as one argument.
# The scripts run as the runner runs `shell: bash` (bash --noprofile --norc -eo pipefail).
# Skipped, saying why, without git or GNU realpath. Usage: action_steps_check.sh SOURCE_DIR WORK_DIR CMAKE
set -u
source_dir=$1
work=$2
cmake_command=$3
action="$source_dir/action.yml"
for tool in git realpath awk; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "SKIP: $tool is not installed"
    exit 77
  fi
done
if ! realpath -s -m --relative-to=/ /x >/dev/null 2>&1; then
  echo "SKIP: realpath lacks -s/-m/--relative-to (GNU coreutils); GitHub's Linux runners have it"
  exit 77
fi
rm -rf "$work"
mkdir -p "$work"
work=$(cd "$work" && pwd -P)
fail=0
failed() { echo "FAIL: $*"; fail=1; }

# The `run: |` block of the step named $1, as the runner would hand it to bash.
step_script() {
  awk -v name="    - name: $1" '
    $0 == name { in_step = 1; next }
    in_step && /^    - name: / { exit }
    in_step && $0 == "      run: |" { in_run = 1; next }
    in_run { if ($0 != "" && substr($0, 1, 8) != "        ") exit; print substr($0, 9) }
  ' "$action"
}
step_script "Lint catalogs and profiles" > "$work/lint-step.sh"
step_script "Cache key for the pinned capsule" > "$work/key-step.sh"
step_script "Build the pinned capsule" > "$work/build-step.sh"
for step in lint key build; do
  [ -s "$work/$step-step.sh" ] || { echo "FAIL: no run script found for the $step step in $action"; exit 1; }
done

# A capsule that records its arguments (one a line) and the configuration it was given.
cat > "$work/fake-capsule" <<'EOF'
#!/bin/bash
printf '%s\n' "$@" > "$FAKE_LOG"
while [ $# -gt 0 ]; do
  case $1 in
    --config) cat "$2" > "$FAKE_LOG.config" ;;
    --format) if [ "$2" = sarif ] && [ -z "${FAKE_EMPTY_SARIF:-}" ]; then echo '{"version":"2.1.0","runs":[]}'; fi ;;
  esac
  shift
done
exit "${FAKE_STATUS:-0}"
EOF
chmod +x "$work/fake-capsule"

git_in() { git -C "$1" -c user.name=test -c user.email=test@example.invalid "${@:2}"; }

# Repository `repo`: the base commit has configurations at the top and in a/, a link and a
# directory named capsule-lint.toml; the head (the pull request) adds permissive ones of its own.
repo="$work/repo"
mkdir -p "$repo"
git_in "$repo" init -q
for dir in ml a/b l d; do mkdir -p "$repo/$dir/catalogs" && touch "$repo/$dir/catalogs/.keep"; done
mkdir -p "$repo/catalogs" && touch "$repo/catalogs/.keep"
echo "# base top" > "$repo/capsule-lint.toml"
echo "# base a" > "$repo/a/capsule-lint.toml"
ln -s ../capsule-lint.toml "$repo/l/capsule-lint.toml"
mkdir -p "$repo/d/capsule-lint.toml" && touch "$repo/d/capsule-lint.toml/.keep"
git_in "$repo" add -A && git_in "$repo" commit -qm base
base=$(git -C "$repo" rev-parse HEAD)
echo "# pr top" > "$repo/capsule-lint.toml"
echo "# pr ml" > "$repo/ml/capsule-lint.toml"
echo "# pr a/b" > "$repo/a/b/capsule-lint.toml"
git_in "$repo" add -A && git_in "$repo" commit -qm head

# A repository without any lint configuration.
bare="$work/bare"
mkdir -p "$bare/catalogs" && touch "$bare/catalogs/.keep"
git_in "$bare" init -q && git_in "$bare" add -A && git_in "$bare" commit -qm base
bare_base=$(git -C "$bare" rev-parse HEAD)

# A shallow clone of the head only: the merge base is not there (actions/checkout's default).
git clone -q --depth 1 "file://$repo" "$work/shallow" 2>/dev/null

# run_lint NAME DIR ROOT BASE [VAR=VALUE...]: runs the lint step in DIR; its log, outputs and the
# capsule's arguments land in $work/NAME.*
run_lint() {
  local name=$1 dir=$2 root=$3 base_input=$4
  shift 4
  mkdir -p "$work/$name.temp"
  : > "$work/$name.out"
  rm -f "$work/$name.args" "$work/$name.args.config"
  (cd "$dir" && env CAPSULE="$work/fake-capsule" FAKE_LOG="$work/$name.args" ROOT="$root" FORMAT=github \
    SARIF_FILE="" TEST_SUITES="" LINT_ARGS="" BASE_INPUT="$base_input" PR_BASE="" \
    RUNNER_TEMP="$work/$name.temp" GITHUB_OUTPUT="$work/$name.out" "$@" \
    bash --noprofile --norc -eo pipefail "$work/lint-step.sh" > "$work/$name.log" 2>&1)
}
output_of() { sed -n "s/^$2=//p" "$work/$1.out"; }
expect_status() {
  local got
  got=$(output_of "$1" status)
  [ "$got" = "$2" ] || failed "$1: status output '$got', expected '$2'"
}
expect_config() {  # expect_config NAME TEXT: lint got --config with exactly TEXT
  if ! grep -qx -- "--config" "$work/$1.args" || [ "$(cat "$work/$1.args.config" 2>/dev/null)" != "$2" ]; then
    failed "$1: expected --config with '$2'; capsule got: $(tr '\n' ' ' < "$work/$1.args")"
  elif grep -qx -- "--no-config" "$work/$1.args"; then
    failed "$1: both --config and --no-config"
  fi
}
expect_no_config() {
  if ! grep -qx -- "--no-config" "$work/$1.args" || grep -qx -- "--config" "$work/$1.args"; then
    failed "$1: expected --no-config alone; capsule got: $(tr '\n' ' ' < "$work/$1.args")"
  fi
}
expect_error() {  # expect_error NAME TEXT: one ::error line of the step says TEXT
  grep -q "^::error title=capsule::.*$2" "$work/$1.log" || failed "$1: no ::error line saying '$2'; log: $(cat "$work/$1.log")"
}
expect_no_error() {
  if grep -q "^::error" "$work/$1.log"; then failed "$1: unexpected error: $(cat "$work/$1.log")"; fi
}

# The walk, for each root spelling.
run_lint root-dot "$repo" . "$base"
expect_config root-dot "# base top"; expect_status root-dot 0; expect_no_error root-dot
run_lint root-ml "$repo" ml "$base"
expect_config root-ml "# base top"; expect_status root-ml 0; expect_no_error root-ml
run_lint root-ml-spelled "$repo" ./ml/ "$base"
expect_config root-ml-spelled "# base top"; expect_status root-ml-spelled 0
run_lint root-a-b "$repo" a/b "$base"
expect_config root-a-b "# base a"; expect_status root-a-b 0; expect_no_error root-a-b
grep -q "^capsule: lint configuration a/capsule-lint.toml from the base revision$" "$work/root-a-b.log" \
  || failed "root-a-b: the log does not name a/capsule-lint.toml: $(cat "$work/root-a-b.log")"
run_lint root-absolute "$repo" "$repo/a/b" "$base"
expect_config root-absolute "# base a"; expect_status root-absolute 0
run_lint no-config "$bare" . "$bare_base"
expect_no_config no-config; expect_status no-config 0; expect_no_error no-config
# lint lints as it finds: a failing lint keeps its own status.
run_lint lint-fails "$repo" ml "$base" FAKE_STATUS=1
expect_status lint-fails 1

# What the walk finds first and cannot use is refused, not skipped.
run_lint link "$repo" l "$base"
expect_no_config link; expect_status link 2; expect_error link "l/capsule-lint.toml is a symbolic link"
run_lint directory "$repo" d "$base"
expect_no_config directory; expect_status directory 2; expect_error directory "d/capsule-lint.toml is not a regular file"

# No merge base: --no-config and a failed step, never the pull request's own file.
run_lint shallow "$work/shallow" ml "$base"
expect_no_config shallow; expect_status shallow 2; expect_error shallow "fetch-depth: 0"
run_lint bad-base "$repo" ml no-such-revision
expect_no_config bad-base; expect_status bad-base 2; expect_error bad-base "fetch-depth: 0"
run_lint outside "$repo" .. "$base"
expect_no_config outside; expect_status outside 2; expect_error outside "not a directory of the checked-out repository"
# A push (no base): lint's own discovery, neither flag.
run_lint push "$repo" ml ""
if grep -qx -- "--config\|--no-config" "$work/push.args"; then failed "push: a configuration flag was passed"; fi
expect_status push 0

# A hostile root forges no workflow command: its line breaks and % are encoded.
run_lint hostile "$repo" $'nowhere%0A\n::warning::forged\r\n::set-output name=status::0' "$base"
expect_status hostile 2
if grep -q "^::warning\|^::set-output" "$work/hostile.log"; then failed "hostile: a forged line reached the log: $(cat "$work/hostile.log")"; fi
expect_error hostile "nowhere%250A%0A::warning::forged%0D%0A::set-output"

# SARIF.
run_lint sarif "$repo" . "$base" SARIF_FILE=capsule-lint.sarif
if [ "$(output_of sarif sarif-file)" != capsule-lint.sarif ] || [ ! -s "$repo/capsule-lint.sarif" ]; then
  failed "sarif: no SARIF file or output: $(cat "$work/sarif.log")"
fi
expect_status sarif 0
rm -f "$repo/capsule-lint.sarif"
mkdir -p "$work/elsewhere"
ln -s "$work/elsewhere" "$repo/reports"
run_lint sarif-parent-link "$repo" . "$base" SARIF_FILE=reports/capsule-lint.sarif
[ -z "$(output_of sarif-parent-link sarif-file)" ] || failed "sarif-parent-link: sarif-file was output"
[ ! -e "$work/elsewhere/capsule-lint.sarif" ] || failed "sarif-parent-link: SARIF was written through the link"
expect_status sarif-parent-link 2; expect_error sarif-parent-link "reports is a symbolic link"
run_lint sarif-deep-link "$repo" . "$base" SARIF_FILE=reports/sub/capsule-lint.sarif
expect_status sarif-deep-link 2; expect_error sarif-deep-link "reports is a symbolic link"
rm "$repo/reports"
echo victim > "$work/victim"
ln -s "$work/victim" "$repo/capsule-lint.sarif"
run_lint sarif-target-link "$repo" . "$base" SARIF_FILE=capsule-lint.sarif
if [ "$(cat "$work/victim")" != victim ] || [ -L "$repo/capsule-lint.sarif" ] || [ ! -s "$repo/capsule-lint.sarif" ]; then
  failed "sarif-target-link: the link was written through or not replaced"
fi
expect_status sarif-target-link 0
rm -f "$repo/capsule-lint.sarif"
run_lint sarif-empty "$repo" . "$base" SARIF_FILE=capsule-lint.sarif FAKE_EMPTY_SARIF=1
[ -z "$(output_of sarif-empty sarif-file)" ] || failed "sarif-empty: sarif-file was output for no SARIF"
expect_status sarif-empty 2; expect_error sarif-empty "wrote no SARIF"
rm -f "$repo/capsule-lint.sarif"
run_lint sarif-no-folder "$repo" . "$base" SARIF_FILE=missing/capsule-lint.sarif
[ -z "$(output_of sarif-no-folder sarif-file)" ] || failed "sarif-no-folder: sarif-file was output"
expect_status sarif-no-folder 2; expect_error sarif-no-folder "cannot write SARIF to missing/capsule-lint.sarif"

# The docs URL: from the cache-key step, checked by the build's own rule, passed to cmake whole.
mkdir -p "$work/action-tree" && echo x > "$work/action-tree/file"
key_step() {  # key_step NAME REPOSITORY REF
  : > "$work/$1.out"
  env ACTION_PATH="$work/action-tree" ACTION_REPOSITORY="$2" ACTION_REF="$3" RUNNER_OS_NAME=Linux \
    GITHUB_ACTION_REPOSITORY="" GITHUB_ACTION_REF="" GITHUB_OUTPUT="$work/$1.out" \
    bash --noprofile --norc -eo pipefail "$work/key-step.sh" > "$work/$1.log" 2>&1 || failed "$1: the key step failed: $(cat "$work/$1.log")"
}
expect_docs_url() {
  key_step "$1" "$2" "$3"
  [ "$(output_of "$1" docs-url)" = "$4" ] || failed "$1: docs-url '$(output_of "$1" docs-url)', expected '$4'"
}
expect_docs_url url-tag owner/capsule v0.1.0 "https://github.com/owner/capsule/blob/v0.1.0/docs/"
expect_docs_url url-branch my-org/capsule.fork release/1.x "https://github.com/my-org/capsule.fork/blob/release/1.x/docs/"
expect_docs_url url-local "" "" ""
expect_docs_url url-dotdot owner/capsule "v1/../../evil" ""
expect_docs_url url-space owner/capsule "v1 x" ""
expect_docs_url url-query owner/capsule "v1?x=1#y" ""
expect_docs_url url-three-parts owner/capsule/extra v1 ""
expect_docs_url url-name-space "owner/na me" v1 ""
expect_docs_url url-dot-owner "../capsule" v1 ""
key_step key-fork other/capsule v0.1.0
[ "$(output_of key-fork key)" != "$(output_of url-tag key)" ] || failed "key-fork: two repositories at one ref share a cache key"
cat > "$work/check-url.cmake" <<EOF
include("$source_dir/cmake/docs_url.cmake")
capsule_check_docs_url("https://github.com/my-org/capsule.fork/blob/release/1.x/docs/" error)
if(error)
  message(FATAL_ERROR "\${error}")
endif()
EOF
"$cmake_command" -P "$work/check-url.cmake" || failed "the derived docs URL fails the build's CAPSULE_DOCS_URL check"

# The build step with stand-in sudo and cmake: -DCAPSULE_DOCS_URL=... is one argument, or absent.
mkdir -p "$work/bin"
printf '#!/bin/sh\nexit 0\n' > "$work/bin/sudo"
cat > "$work/bin/cmake" <<'EOF'
#!/bin/bash
if [ "$1" = --build ]; then
  mkdir -p "$2/tools/cli" "$2/share/capsule"
  printf '#!/bin/sh\necho capsule 0\n' > "$2/tools/cli/capsule" && chmod +x "$2/tools/cli/capsule"
  touch "$2/share/capsule/test-suites.toml"
else
  printf '%s\n' "$@" > "$CMAKE_LOG"
fi
EOF
chmod +x "$work/bin/sudo" "$work/bin/cmake"
build_step() {  # build_step NAME DOCS_URL
  mkdir -p "$work/$1.temp"
  : > "$work/$1.out"
  env PATH="$work/bin:$PATH" ACTION_PATH="$work/action-tree" CACHE_HIT=false DOCS_URL="$2" CMAKE_LOG="$work/$1.cmake" \
    RUNNER_TEMP="$work/$1.temp" GITHUB_OUTPUT="$work/$1.out" \
    bash --noprofile --norc -eo pipefail "$work/build-step.sh" > "$work/$1.log" 2>&1 || failed "$1: the build step failed: $(cat "$work/$1.log")"
}
build_step build-url "https://github.com/owner/capsule/blob/v0.1.0/docs/"
grep -qx -- "-DCAPSULE_DOCS_URL=https://github.com/owner/capsule/blob/v0.1.0/docs/" "$work/build-url.cmake" \
  || failed "build-url: cmake did not get the docs URL: $(tr '\n' ' ' < "$work/build-url.cmake")"
build_step build-default ""
if grep -q -- "CAPSULE_DOCS_URL" "$work/build-default.cmake"; then failed "build-default: CAPSULE_DOCS_URL was passed"; fi

[ "$fail" = 0 ] && echo "ok: the action's lint, key and build steps behave as docs/ci.md says"
exit $fail
