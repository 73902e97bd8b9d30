#!/usr/bin/env bash
# Drives `capsule completions SHELL` the way the shell would. bash: the script is sourced and
# _capsule is called with COMP_WORDS/COMP_CWORD, and the candidates are compared. fish: the
# script must parse (`fish -n`) and `complete -C` must give the candidates and, for a command and
# a few flags, their descriptions. zsh: the script must
# parse (`zsh -n`) and _capsule, run with zsh's completion builtins stubbed, must offer them. A shell that is not installed is a SKIP (exit 77)
# with the reason, never a pass.
# usage: completions_check.sh bash|zsh|fish CAPSULE SOURCE_DIR WORK_DIR
set -u
shell=$1 capsule=$2 source_dir=$3 work=$4
mkdir -p "$work"
script=$work/capsule.$shell
if ! command -v "$shell" >/dev/null 2>&1; then
  echo "SKIP: $shell is not installed (tools/setup.sh installs it), so its completion script was not checked"
  exit 77
fi
"$capsule" completions "$shell" > "$script" || { echo "FAIL: capsule completions $shell exited $?"; exit 1; }
case $shell in
  zsh) zsh -n "$script" || { echo "FAIL: zsh -n rejects the script"; exit 1; }; echo "zsh -n: ok" ;;
  fish) fish -n "$script" || { echo "FAIL: fish -n rejects the script"; exit 1; }; echo "fish -n: ok" ;;
esac

failures=0
# A home of our own holding a profiles folder with one profile: names follow the data the command
# line names, and `~/profiles` must reach `completions --list` expanded, as the shell would.
home=$work/home-$shell
mkdir -p "$home/profiles"
sed 's/^name = .*/name = "mine_only"/' "$source_dir/profiles/checked_cpu.toml" > "$home/profiles/mine.toml"
if [ "$shell" = zsh ]; then
  # zsh's completion system needs a terminal; its builtins are stubbed instead (compadd prints
  # what it is offered, unfiltered), and _capsule runs with `words` and CURRENT set.
  offered() {
    (cd "$source_dir" && zsh -f -c '
      compadd() { if [[ $1 == -a ]]; then print -l -- ${(P)2}; else shift; print -l -- "$@"; fi }
      compset() { return 0 }
      _files() { print -- "files:$*" }
      compdef() { return 0 }
      source $1; shift
      words=("$@"); CURRENT=$#
      _capsule' _ "$script" "$capsule" $1 | LC_ALL=C sort)
  }
  expect_offered() {
    local got before=$failures; got=$(offered "$1")
    for want in $2; do
      if ! printf '%s\n' "$got" | grep -qx -- "$want"; then
        echo "FAIL: capsule $1<TAB> does not offer $want (offers: $(echo $got))"; failures=$((failures + 1))
      fi
    done
    [ "$failures" -eq "$before" ] && echo "ok: capsule $1<TAB> offers $2"
  }
  expect_offered "pl" "plan lint completions"
  expect_offered "plan --pro" "--profile --profiles --ops --graph --format --color"
  expect_offered "plan --profile che" "checked_cpu checked_cuda strict"
  expect_offered "plan --format m" "text json markdown dot"
  expect_offered "lint --deny warn" "warnings expired-trust"
  expect_offered "run mlp_reg" "mlp_regression"
  expect_offered "plan --graph x" "files:"
  expect_offered "lint --root x" "files:-/"
  # A profile is a name or a file: files once the word looks like a path, as in bash and fish.
  expect_offered "plan --profile x.toml" "files:"
  expect_offered "plan --profile ./x" "files:"
  expect_offered "plan --profiles $home/profiles --profile m" "mine_only"
  HOME=$home expect_offered "plan --profiles ~/profiles --profile m" "mine_only"
  [ "$failures" -eq 0 ] || { echo "$failures completion(s) differ"; exit 1; }
  exit 0
fi
if [ "$shell" = fish ]; then
  # fish completes a whole command line with `complete -C`; the script calls `capsule` on PATH.
  # Each candidate is printed as `candidate<TAB>description`: `expect` compares the candidates,
  # `expect_described` the whole lines, so the descriptions fish read from the script are checked.
  completed() {
    (cd "$source_dir" && PATH="$(dirname "$capsule"):$PATH" fish -c 'source $argv[1]; complete -C $argv[2]' \
       "$script" "capsule $1" | LC_ALL=C sort)
  }
  expect_described() {
    local line=$1 want=$2 got
    got=$(completed "$line")
    if [ "$got" != "$want" ]; then
      echo "FAIL: capsule $line<TAB> (with descriptions)"; echo "  want: $(echo $want)"; echo "  got:  $(echo $got)"
      failures=$((failures + 1))
    else
      echo "ok: capsule $line<TAB> -> $(echo $got)"
    fi
  }
  expect() {
    local line=$1 want=$2 got
    got=$(completed "$line" | cut -f1)
    if [ "$got" != "$want" ]; then
      echo "FAIL: capsule $line<TAB>"; echo "  want: $(echo $want)"; echo "  got:  $(echo $got)"
      failures=$((failures + 1))
    else
      echo "ok: capsule $line<TAB> -> $(echo $got)"
    fi
  }
  nl=$'\n' tab=$'\t'
  expect "pl" "plan"
  expect "plan --pro" "--profile${nl}--profiles"
  # A command's and a flag's description, as fish shows them; `'` in a help text survives quoting.
  expect_described "pl" "plan${tab}select one capsule per op or graph node under a profile..."
  expect_described "run --dump" "--dump-graph${tab}write the model's lowered IR graph"
  expect_described "check --assu" "--assurance${tab}gate under this assurance instead of the profile's"
  expect "plan --profile che" "checked_cpu${nl}checked_cuda"
  expect "plan --ops matmul,rel" "matmul,relu"
  expect "lint --deny warn" "warnings"
  expect "run mlp_reg" "mlp_regression"
  expect "plan --profile $home/profiles/mi" "$home/profiles/mine.toml"
  expect "plan --profiles $home/profiles --profile m" "mine_only"
  HOME=$home expect "plan --profiles ~/profiles --profile m" "mine_only"
  [ "$failures" -eq 0 ] || { echo "$failures completion(s) differ"; exit 1; }
  exit 0
fi

# expect "WORDS TO COMPLETE" "EXPECTED CANDIDATES, one a line"; the last word is the one completed.
expect() {
  local line=$1 want=$2 got
  got=$(cd "$source_dir" && bash -c '
    source "$1"; shift
    COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 ))
    _capsule
    printf "%s\n" "${COMPREPLY[@]}" | LC_ALL=C sort' _ "$script" "$capsule" $line)
  if [ "$got" != "$want" ]; then
    echo "FAIL: capsule $line<TAB>"; echo "  want: $(echo $want)"; echo "  got:  $(echo $got)"
    failures=$((failures + 1))
  else
    echo "ok: capsule $line<TAB> -> $(echo $got)"
  fi
}
nl=$'\n'
expect "pl" "plan"
expect "--col" "--color"
expect "--color al" "always"
expect "--color always li" "lint${nl}list"
expect "plan --pro" "--profile${nl}--profiles"
expect "plan --profile che" "checked_cpu${nl}checked_cuda"
expect "plan --format m" "markdown"
expect "plan --ops matmul,rel" "matmul,relu"
expect "lint --deny warn" "warnings"
expect "lint --allow expired-t" "expired-trust"
expect "run mlp_reg" "mlp_regression"
expect "list pro" "profiles"
expect "completions z" "zsh"
expect "check --assurance allow-" "allow-trusted-runtime"
# Names follow the data the command line names; a profile file is offered once the word is a path.
expect "plan --profiles $home/profiles --profile m" "mine_only"
HOME=$home expect "plan --profiles ~/profiles --profile m" "mine_only"
expect "plan --profile $home/profiles/mi" "$home/profiles/mine.toml"
expect "--color never plan --root $source_dir --ops matmul,rel" "matmul,relu"
# The script trusts no name it is given: a program answering --list with shell syntax gets only
# its plain names completed, and nothing it printed runs.
mkdir -p "$work/fake"
cat > "$work/fake/capsule" <<FAKE
#!/bin/sh
printf '%s\n' 'safe_one' '\$(touch $work/pwned)' '\`touch $work/pwned\`' 'a b' '*'
FAKE
chmod +x "$work/fake/capsule"
rm -f "$work/pwned"
capsule_real=$capsule capsule=$work/fake/capsule
expect "plan --profile s" "safe_one"
capsule=$capsule_real
if [ -e "$work/pwned" ]; then echo "FAIL: a name from --list ran as a command"; failures=$((failures + 1)); fi
[ "$failures" -eq 0 ] || { echo "$failures completion(s) differ"; exit 1; }
