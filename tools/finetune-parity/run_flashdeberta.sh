#!/usr/bin/env bash
# flashdeberta's side of the fine-tuning comparison, on the 2-core machine:
#   run_flashdeberta.sh FLASHDEBERTA DATA INIT OUT [THREADS] [BACKEND] [DTYPE]
# trains INIT (make_init.py's checkpoint) on DATA/train.jsonl with the recipe hf_finetune.py repeats in
# transformers, evaluating DATA/eval.jsonl each epoch (OUT/train.jsonl: the eval lines and the summary), then
# classifies eval.jsonl's texts with the model written (OUT/classify.jsonl, for hf_finetune.py --ours-classify).
# BACKEND (default eigen): where train runs, e.g. cuda on the GPU machine (classify stays on eigen); DTYPE (default
# fp32): train's --dtype, bf16 or fp16 for mixed precision on cuda.
set -euo pipefail
flashdeberta=$1 data=$2 init=$3 out=$4 threads=${5:-2} backend=${6:-eigen} dtype=${7:-fp32}
dtype_args=()
[ "$dtype" != fp32 ] && dtype_args=(--dtype "$dtype")
mkdir -p "$out"
"$flashdeberta" train --model "$init" --train "$data/train.jsonl" --eval "$data/eval.jsonl" --output "$out/model" \
  --epochs 3 --learning-rate 1e-4 --batch-size 16 --max-length 64 --seed 42 --warmup-ratio 0.06 \
  --threads "$threads" --backend "$backend" "${dtype_args[@]}" --logging-steps 50 >"$out/train.jsonl" 2>"$out/train.log"
python3 -c 'import json, sys
for line in sys.stdin: print(json.dumps({"text": json.loads(line)["text"]}))' <"$data/eval.jsonl" |
  "$flashdeberta" classify --model "$out/model" --jsonl --threads "$threads" >"$out/classify.jsonl"
cat "$out/train.jsonl"
