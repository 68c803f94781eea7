#!/usr/bin/env bash
# Trains both tiny models on the GPU machine, each step inside one device call (under 10 minutes):
#   tools/train-tiny/train_on_gpu.sh pretrain WORK OUT    masked-LM pretraining (4000 steps), shipped as
#                                                         OUT/models/tiny-en (float16)
#   tools/train-tiny/train_on_gpu.sh finetune WORK OUT    the section classifier on models/tiny-en as shipped,
#                                                         as OUT/models/tiny-en-sections
# WORK holds corpus/{train,heldout}.ids.npy and corpus/heldout.txt (encode_corpus.py) and
# sections/{train,heldout}.tsv (build_corpus.py); the tokenizer is models/tiny-en (train_tokenizer.py).
# The float32 checkpoints and their state files (steps, held-out figures) stay in OUT/mlm and OUT/sections.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
step=$1 work=$2 out=$3
models="$here/../../models"
case "$step" in
  pretrain)
    python3 "$here/pretrain_mlm.py" --corpus "$work/corpus" --tokenizer "$models/tiny-en" --out "$out/mlm" \
      --total-steps 4000 --minutes 9
    python3 "$here/ship_models.py" --mlm "$out/mlm" --tokenizer "$models/tiny-en" --out "$out/models" ;;
  finetune)
    python3 "$here/finetune_sections.py" --sections "$work/sections" --backbone "$models/tiny-en" \
      --out "$out/sections"
    python3 "$here/ship_models.py" --sections "$out/sections" --tokenizer "$models/tiny-en" --out "$out/models" ;;
  *) echo "usage: $0 pretrain|finetune WORK OUT" >&2; exit 2 ;;
esac
