#!/bin/bash
# Fenced CUDA builds through the Python worker: host PCH made by the trusted maker?
# usage: bash run_device.sh OUTDIR [cpu]   (cpu: local dry run with the C++ CPU candidate)
set -u
OUT=${1:?out dir}; MODE=${2:-cuda}
HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$(cd "$HERE/../../../.." && pwd)
PY=${PY:-python3}
S=/tmp/kbrl_fpch_s; C=/tmp/kbrl_fpch_c; EXT=$S/torch_extensions; BD=$EXT/cands
rm -rf "$S" "$C"; mkdir -p "$C" "$OUT"
exec > >(tee "$OUT/run.log") 2>&1
echo "== $(date -u +%FT%TZ) mode=$MODE host=$(hostname) kernel=$(uname -r)"
$PY -c "import sys,torch;print('python',sys.version.split()[0],'torch',torch.__version__,'cuda',torch.version.cuda,torch.cuda.is_available())"
command -v nvcc && nvcc --version | tail -2; gcc --version | head -1; nvidia-smi -L 2>/dev/null
if [ "$MODE" = cpu ]; then SRC=$ROOT/test/data/candidates_runtime/relu_load_inline_cpu.py; MARK='#include <torch/extension.h>'
else SRC=$ROOT/test/data/candidates_runtime/relu_cuda_load_inline.py; MARK='#include <cuda_runtime.h>'; fi
CANDS=()
for i in 1 2 3 4; do
  sed "s|^$MARK\$|$MARK\n// kbrl fenced-pch variant $i|" "$SRC" > "$C/cand$i.py"
  grep -q "variant $i" "$C/cand$i.py" || { echo "sed failed"; exit 1; }
  CANDS+=(--candidate "$C/cand$i.py")
done
diff "$C/cand1.py" "$C/cand2.py"
printf '#!/bin/sh\nexec %s -u -B %s "$@"\n' "$(command -v $PY)" "$HERE/collect_log_hook.py" > "$C/pyshim"; chmod +x "$C/pyshim"
CMD=($PY "$ROOT/tools/eval_worker_selftest.py" --python "$C/pyshim" --reference "$ROOT/test/data/problems/1_small_relu.py"
     "${CANDS[@]}" --device "$MODE" --scratch "$S" --build-dir "$BD" --keep-scratch --timeout 300)
echo "== command: ${CMD[*]}"
T0=$(date +%s.%N); echo "== start $T0"
timeout -k 5 ${SELFTEST_LIMIT:-320} "${CMD[@]}" | tee "$OUT/selftest.jsonl" | while IFS= read -r l; do
  echo "$(date +%s.%N) ${l:0:400}"; done
echo "== selftest done (rc ${PIPESTATUS[0]}) after $(awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN{print b-a}') s"
for k in $(seq 1 30); do
  pids=$(pgrep -f "kbrl_eval.pch_maker import main" | tr '\n' ' ')
  [ -z "$pids" ] && break; [ $k = 1 ] && echo "== makers still running: $pids; waiting"; sleep 2
done
echo "== makers left: ${pids:-none} at $(date +%s.%N)"
{
  for d in "$EXT/.kbrl-host-pch" "$EXT/.kbrl-pch" "$EXT/.kbrl-bin" "$BD/.kbrl-pch-wishes" "$S/.kbrl-host-pch" "$S/.kbrl-pch" "$S/.kbrl-bin"; do
    echo "## $d"; [ -e "$d" ] && find "$d" -maxdepth 3 -printf '%p %s %T@\n' || echo "(absent)"; done
  echo "## all wishes folders"; find "$S" -name .kbrl-pch-wishes -printf '%p\n'
  echo "## build dir"; find "$BD" -maxdepth 2 -printf '%p %s %T@\n'
  echo "## failed files"; find "$S" -name failed -exec sh -c 'echo "--- $1"; head -c 3000 "$1"' _ {} \;
  echo "## gcc -H check: ninja logs"; find "$BD" -name .ninja_log -exec sh -c 'echo "--- $1"; cat "$1"' _ {} \;
} > "$OUT/listings.txt" 2>&1
cat "$OUT/listings.txt" | head -80
cp "$S/worker_output.txt" "$OUT/worker_output.txt" 2>/dev/null
echo "== worker output grep (pch|maker|fence|hook|wish)"
grep -inE "pch|maker|fence|hook|wish" "$S/worker_output.txt" | cut -c1-600
$PY - "$OUT/selftest.jsonl" "$OUT/answers.json" <<'PYEOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
out = {"hello": None, "candidates": []}
for r in rows:
    if "hello" in r:
        out["hello"] = r
        print("hello write_fence=%r device=%r torch=%r start_s=%s" % (r["hello"].get("write_fence"), r["hello"].get("device"), r["hello"].get("torch"), r.get("start_seconds")))
    elif "candidate" in r:
        a = r["answer"]
        out["candidates"].append(r)
        ph = a.get("phase_seconds") or {}
        print("%s compile_s=%s seconds=%s error=%s compiled=%s correct=%s trials=%s/%s flags=%s phases=%s excerpt=%r" % (
            r["candidate"].rsplit("/", 1)[-1], a.get("compile_seconds"), r["seconds"], a.get("error"),
            a.get("compiled"), a.get("correct"), a.get("trials_passed"), a.get("trials_total"),
            a.get("hack_flags"), json.dumps(ph), (a.get("error_excerpt") or "")[:300]))
json.dump(out, open(sys.argv[2], "w"), indent=1)
PYEOF
echo "== end $(date -u +%FT%TZ)"
