#!/bin/sh
# The plan's DOT output is valid Graphviz: graphviz's own `dot` renders every drawing (graph
# plans, an op-list plan, the hostile graphs) to SVG without an error or a warning, and the legend
# cluster reaches the SVG. Skipped, saying why, where `dot` is not installed (tools/setup.sh
# installs graphviz). Usage: dot_render_check.sh CAPSULE SOURCE_DIR WORK_DIR
set -u
capsule=$1
root=$2
work=$3
if ! command -v dot >/dev/null 2>&1; then
  echo "SKIP: graphviz's dot is not installed (tools/setup.sh installs the graphviz package)"
  exit 77
fi
mkdir -p "$work"
fail=0
render() {  # render NAME EXPECTED_STATUS capsule-plan-arguments...
  name=$1
  expected=$2
  shift 2
  "$capsule" plan --root "$root" --format dot "$@" > "$work/$name.dot" 2> "$work/$name.err"
  status=$?
  if [ "$status" -ne "$expected" ]; then
    echo "FAIL: $name: capsule plan exited $status, expected $expected"; cat "$work/$name.err"; fail=1; return
  fi
  [ "$status" -eq 0 ] || { echo "ok: $name refused at load, as allowed"; return; }
  if ! dot -Tsvg "$work/$name.dot" -o "$work/$name.svg" 2> "$work/$name.dot-err" || [ -s "$work/$name.dot-err" ]; then
    echo "FAIL: $name: dot did not render it cleanly:"; cat "$work/$name.dot-err"; fail=1; return
  fi
  if ! grep -q "<title>cluster_legend</title>" "$work/$name.svg"; then
    echo "FAIL: $name: the SVG has no legend cluster"; fail=1; return
  fi
  echo "ok: $name renders"
}

render attention-block 0 --profile libtorch_forward_cuda --graph "$root/tests/data/graphs/attention-block.graph.toml"
render mlp 0 --profile checked_cpu --graph "$root/examples/graphs/mlp-4-8-1.graph.toml"
render ops 0 --profile libtorch_forward_cuda --ops add,scaled_dot_product_attention,relu,matmul
render hostile-payload 0 --profile checked_cpu --graph "$root/tests/data/hostile/forgery/hostile-payload.graph.toml"
# A build that refuses the hostile graph name at load exits 2; one that loads it must draw it.
# Any other status (a crash: 134, 139, ...) fails, whatever the first run returned.
"$capsule" plan --root "$root" --profile checked_cpu --graph "$root/tests/data/hostile/forgery/hostile-name.graph.toml" \
  > /dev/null 2>&1
hostile_status=$?
case $hostile_status in
  0|2) render hostile-name "$hostile_status" --profile checked_cpu --graph "$root/tests/data/hostile/forgery/hostile-name.graph.toml" ;;
  *) echo "FAIL: hostile-name: capsule plan exited $hostile_status, expected 0 (drawn) or 2 (refused at load)"; fail=1 ;;
esac
exit $fail
